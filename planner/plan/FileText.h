//===- FileText.h - whole files and YAML errors as Status -------*- C++ -*-===//
// defines: readWholeFile, yamlErrorStatus
//
// The runtime-side readers (plans, machine files, safetensors) all read a
// file whole and turn yaml-cpp's exceptions into FILE:LINE:COL messages.
#pragma once

#include "planner/plan/Status.h"

#include <string>

namespace YAML {
class Exception;
} // namespace YAML

namespace sharc {

/// The file's bytes; a file that cannot be opened is bad input (`what`,
/// when not empty, names it in the message: "plan", "machine file"), a
/// failed read a runtime error.
Result<std::string> readWholeFile(const std::string &path,
                                  const std::string &what);

/// "FILE:LINE:COL: message" (yaml-cpp's marks count from 0) as bad input.
Status yamlErrorStatus(const YAML::Exception &error,
                       const std::string &fileName);

} // namespace sharc
