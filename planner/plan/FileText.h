//===- FileText.h - whole files and YAML errors as Status -------*- C++ -*-===//
// defines: readWholeFile, readYaml
//
// The runtime-side readers (plans, machine files, safetensors) all read a
// file whole and turn yaml-cpp's exceptions into FILE:LINE:COL messages.
#pragma once

#include "planner/plan/Status.h"

#include <string>

#include <functional>

namespace YAML {
class Node;
} // namespace YAML

namespace sharc {

/// The file's bytes; a file that cannot be opened is bad input (`what`,
/// when not empty, names it in the message: "plan", "machine file"), a
/// failed read a runtime error.
Result<std::string> readWholeFile(const std::string &path,
                                  const std::string &what);

/// Parses `text` as YAML and hands the root to `read`. yaml-cpp throws; this
/// is where its exceptions become "FILE:LINE:COL: message" (its marks count
/// from 0) as bad input, so no reader needs a try block of its own.
Status readYaml(const std::string &text, const std::string &fileName,
                const std::function<Status(const YAML::Node &)> &read);

} // namespace sharc
