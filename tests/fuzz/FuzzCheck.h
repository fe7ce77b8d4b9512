//===- FuzzCheck.h - invariants a fuzz harness asserts ----------*- C++ -*-===//
// defines: SHARC_FUZZ_CHECK
//
// A reader that accepts an input promises more than "no crash": what it
// returns must obey the rules its header states. A harness states those
// rules with SHARC_FUZZ_CHECK, which prints the broken rule and aborts, so
// libFuzzer saves the input as a crash, as it does for a sanitizer report.
#pragma once

#include <cstdio>
#include <cstdlib>

#define SHARC_FUZZ_CHECK(cond, what)                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "fuzz invariant broken: %s (%s) at %s:%d\n", what,  \
                   #cond, __FILE__, __LINE__);                                 \
      std::abort();                                                            \
    }                                                                          \
  } while (false)
