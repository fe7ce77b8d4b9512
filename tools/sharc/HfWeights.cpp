//===- HfWeights.cpp - a Hugging Face model's weights, whole or sharded ---===//

#include "tools/sharc/HfWeights.h"

#include "planner/plan/FileText.h"

#include "llvm/Support/JSON.h"

#include <filesystem>
#include <map>
#include <set>

using namespace sharc;

namespace {

/// The index's weight_map: tensor name to shard file name, each shard a
/// plain file name (no directory part), so the index reads nothing outside
/// DIR.
Result<std::map<std::string, std::string>>
readWeightMap(const std::string &indexPath) {
  auto text = readWholeFile(indexPath, "index");
  if (!text)
    return text.status();
  auto bad = [&](const std::string &message) {
    return Status::invalidInput(indexPath + ": " + message);
  };
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(*text);
  if (!json)
    return bad("invalid JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  const llvm::json::Object *weightMap =
      object ? object->getObject("weight_map") : nullptr;
  if (!weightMap)
    return bad("expected an object with a 'weight_map' object");
  std::map<std::string, std::string> shardOf;
  for (const auto &[key, value] : *weightMap) {
    std::optional<llvm::StringRef> shard = value.getAsString();
    if (!shard)
      return bad("weight_map['" + key.str() + "'] must be a file name");
    std::string file = shard->str();
    if (file.empty() || file == "." || file == ".." ||
        file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos)
      return bad("weight_map['" + key.str() + "'] is '" + file +
                 "', not a file name in the model's directory");
    shardOf[key.str()] = file;
  }
  if (shardOf.empty())
    return bad("weight_map lists no tensor");
  return shardOf;
}

Result<HfWeights> readShards(const std::string &dir,
                             const std::string &indexPath) {
  auto shardOf = readWeightMap(indexPath);
  if (!shardOf)
    return shardOf.status();
  std::set<std::string> shards;
  for (const auto &[name, shard] : *shardOf)
    shards.insert(shard);
  HfWeights weights{{}, indexPath};
  for (const std::string &shard : shards) {
    std::string shardPath = dir + "/" + shard;
    auto file = plan::readSafeTensors(shardPath);
    if (!file)
      return file.status().withContext(indexPath);
    for (plan::NamedTensor &tensor : file->tensors) {
      auto mapped = shardOf->find(tensor.name);
      if (mapped == shardOf->end() || mapped->second != shard)
        return Status::invalidInput(
            shardPath + ": tensor '" + tensor.name + "' is " +
            (mapped == shardOf->end()
                 ? std::string("not in ") + indexPath
                 : "mapped to '" + mapped->second + "' by " + indexPath));
      weights.tensors.tensors.push_back(std::move(tensor));
    }
  }
  for (const auto &[name, shard] : *shardOf)
    if (!weights.tensors.find(name))
      return Status::invalidInput(indexPath + ": maps '" + name + "' to '" +
                                  shard + "', which does not hold it");
  return weights;
}

} // namespace

Result<HfWeights> sharc::readHfWeights(const std::string &dir) {
  std::string indexPath = dir + "/model.safetensors.index.json";
  if (std::filesystem::exists(indexPath))
    return readShards(dir, indexPath);
  std::string path = dir + "/model.safetensors";
  auto file = plan::readSafeTensors(path);
  if (!file)
    return file.status();
  return HfWeights{std::move(*file), path};
}
