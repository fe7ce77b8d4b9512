//===- FileText.cpp - whole files and YAML errors as Status ---------------===//

#include "planner/plan/FileText.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace sharc;

Result<std::string> sharc::readWholeFile(const std::string &path,
                                         const std::string &what) {
  std::string named =
      what.empty() ? "'" + path + "'" : what + " '" + path + "'";
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::invalidInput("cannot open " + named + ": " +
                                std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad())
    return Status::runtimeError("cannot read " + named);
  return text.str();
}

Status sharc::readYaml(const std::string &text, const std::string &fileName,
                       const std::function<Status(const YAML::Node &)> &read) {
  try {
    return read(YAML::Load(text));
  } catch (const YAML::Exception &error) {
    std::string where = fileName;
    if (!error.mark.is_null())
      where += ":" + std::to_string(error.mark.line + 1) + ":" +
               std::to_string(error.mark.column + 1);
    return Status::invalidInput(where + ": " + error.msg);
  } catch (const std::exception &error) {
    return Status::invalidInput(fileName + ": " + error.what());
  }
}
