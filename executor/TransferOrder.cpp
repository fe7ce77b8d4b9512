//===- TransferOrder.cpp - do a plan's transfers pair in order? -----------===//

#include "executor/TransferOrder.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace sharc::exec {

namespace {

/// A communicator's link: (axis, stream, sending stage, receiving stage).
using Link = std::tuple<std::string, int64_t, int64_t, int64_t>;

std::string ordinal(size_t index) {
  size_t n = index + 1;
  const char *suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th"
                       : n % 10 == 1                    ? "st"
                       : n % 10 == 2                    ? "nd"
                       : n % 10 == 3                    ? "rd"
                                                        : "th";
  return std::to_string(n) + suffix;
}

} // namespace

Status checkTransfersPairInOrder(const plan::Plan &plan) {
  // Tags in instruction order: what each sender sends on a link, and what
  // its receiver receives on it. The peer of a transfer is its stage index
  // on the axis (the pipeline's), the instruction's stage the other end.
  std::map<Link, std::vector<int64_t>> sent, received;
  for (const plan::Instruction &instr : plan.instructions) {
    bool isSend = instr.op == "send";
    if (!isSend && instr.op != "recv")
      continue;
    int64_t peer = instr.getInt("peer");
    Link link =
        isSend ? Link{instr.getString("axis"), instr.stream, instr.stage, peer}
               : Link{instr.getString("axis"), instr.stream, peer, instr.stage};
    (isSend ? sent : received)[link].push_back(instr.getInt("tag"));
  }
  for (const auto &[link, tags] : sent) {
    const std::vector<int64_t> &recvTags = received[link];
    const auto &[axis, stream, from, to] = link;
    std::string where = "transfers over " + axis + " from stage " +
                        std::to_string(from) + " to stage " +
                        std::to_string(to) + " on stream " +
                        std::to_string(stream);
    for (size_t i = 0; i < tags.size() && i < recvTags.size(); ++i)
      if (tags[i] != recvTags[i])
        return Status::invalidInput(
            where + " do not pair in order: the " + ordinal(i) +
            " send has tag " + std::to_string(tags[i]) + ", the " + ordinal(i) +
            " recv tag " + std::to_string(recvTags[i]) +
            ". NCCL matches a link's sends and recvs in order (the cpu "
            "backend by tag); the interleaved pipeline schedule lists them "
            "by tag alone: run such a plan with --backend cpu");
    if (tags.size() != recvTags.size())
      return Status::invalidInput(where + ": " + std::to_string(tags.size()) +
                                  " sends but " +
                                  std::to_string(recvTags.size()) + " recvs");
  }
  for (const auto &[link, tags] : received)
    if (!sent.count(link))
      return Status::invalidInput(
          "transfers over " + std::get<0>(link) + " to stage " +
          std::to_string(std::get<3>(link)) + " on stream " +
          std::to_string(std::get<1>(link)) + ": " +
          std::to_string(tags.size()) + " recvs from stage " +
          std::to_string(std::get<2>(link)) + ", which sends none");
  return Status::ok();
}

} // namespace sharc::exec
