//===- FileText.h - whole files and YAML errors as Status -------*- C++ -*-===//
// defines: readWholeFile, readYaml, writeFileAtomically, sameFile
//
// The runtime-side readers (plans, machine files, safetensors) all read a
// file whole and turn yaml-cpp's exceptions into FILE:LINE:COL messages;
// the writers (plans, checkpoints, traces) all replace a file atomically.
#pragma once

#include "planner/plan/Status.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
} // namespace YAML

namespace sharc {

/// The file's bytes; a file that cannot be opened, a directory, a FIFO or a
/// device, or a file larger than this host's memory is bad input (`what`,
/// when not empty, names it in the message: "plan", "machine file"), a
/// failed read a runtime error.
Result<std::string> readWholeFile(const std::string &path,
                                  const std::string &what);

/// Parses `text` as YAML and hands the root to `read`. yaml-cpp throws; this
/// is where its exceptions become "FILE:LINE:COL: message" (its marks count
/// from 0) as bad input, so no reader needs a try block of its own.
Status readYaml(const std::string &text, const std::string &fileName,
                const std::function<Status(const YAML::Node &)> &read);

/// Writes the concatenated `pieces` to `path` through a temporary file in
/// the same folder that is flushed to disk and then renamed over `path`:
/// a full disk or a kill leaves the old file whole, and a failure removes
/// the temporary. Something at `path` that is not a regular file (a
/// directory, a FIFO, a device) is never replaced: bad input.
Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces,
                           const std::string &what);

/// Whether two paths name one existing file (same device and inode), so
/// that an output can be refused when it would overwrite an input.
bool sameFile(const std::string &a, const std::string &b);

} // namespace sharc
