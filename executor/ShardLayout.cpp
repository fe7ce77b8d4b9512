//===- ShardLayout.cpp - mesh coordinates and tensor shard slices ---------===//

#include "executor/ShardLayout.h"

#include "kernels/TensorView.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>

namespace sharc::exec {

std::vector<int64_t> meshCoords(const std::vector<plan::MeshAxis> &mesh,
                                int64_t rank) {
  std::vector<int64_t> coords(mesh.size(), 0);
  for (size_t i = mesh.size(); i-- > 0;) {
    int64_t size = mesh[i].size > 0 ? mesh[i].size : 1;
    coords[i] = rank % size;
    rank /= size;
  }
  return coords;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

int64_t ShardSlice::globalOf(size_t dim, int64_t local) const {
  if (dim >= runs.size())
    return start[dim] + local;
  for (const Run &run : runs[dim]) {
    if (local < run.length)
      return run.globalStart + local;
    local -= run.length;
  }
  return -1; // past the slice: no caller asks
}

int64_t ShardSlice::globalIndex(int64_t local) const {
  int64_t global = 0, globalStride = 1;
  for (size_t d = localShape.size(); d-- > 0;) {
    int64_t localCoord = local % localShape[d];
    local /= localShape[d];
    global += globalOf(d, localCoord) * globalStride;
    globalStride *= globalShape[d];
  }
  return global;
}

namespace {

using Run = ShardSlice::Run;

/// The runs that local indices [from, from + count) of `runs` cover.
std::vector<Run> selectRuns(const std::vector<Run> &runs, int64_t from,
                            int64_t count) {
  std::vector<Run> selected;
  int64_t at = 0; // local index of the run's first element
  for (const Run &run : runs) {
    int64_t begin = std::max(from, at);
    int64_t end = std::min(from + count, at + run.length);
    if (begin < end)
      selected.push_back({run.globalStart + (begin - at), end - begin});
    at += run.length;
  }
  return selected;
}

/// Joins runs that continue each other (a balanced split over one rank).
std::vector<Run> joinRuns(const std::vector<Run> &runs) {
  std::vector<Run> joined;
  for (const Run &run : runs)
    if (!joined.empty() &&
        joined.back().globalStart + joined.back().length == run.globalStart)
      joined.back().length += run.length;
    else
      joined.push_back(run);
  return joined;
}

} // namespace

Result<ShardSlice> shardSlice(const std::vector<plan::MeshAxis> &mesh,
                              const plan::Sharding &sharding,
                              const std::vector<int64_t> &globalShape,
                              const std::vector<int64_t> &coords) {
  ShardSlice slice;
  slice.globalShape = globalShape;
  slice.localShape = globalShape;
  slice.start.assign(globalShape.size(), 0);
  int64_t rank = static_cast<int64_t>(globalShape.size());
  for (const auto &[axisName, dim] : sharding.dimOfAxis)
    if (dim >= rank)
      return Status::invalidInput("sharding of axis '" + axisName +
                                  "' names dim " + std::to_string(dim) +
                                  " of a rank-" + std::to_string(rank) +
                                  " tensor");
  // Axes in mesh order, outer first, so a dim split over [dp, tp] puts the
  // tp pieces inside each dp piece, like the rank layout; those the
  // sharding's order lists come first, in its order.
  auto nesting = [&](size_t a) {
    auto listed =
        std::find(sharding.order.begin(), sharding.order.end(), mesh[a].name);
    return listed != sharding.order.end()
               ? static_cast<size_t>(listed - sharding.order.begin())
               : sharding.order.size() + a;
  };
  std::vector<size_t> axes(mesh.size());
  for (size_t a = 0; a < mesh.size(); ++a)
    axes[a] = a;
  std::stable_sort(axes.begin(), axes.end(),
                   [&](size_t x, size_t y) { return nesting(x) < nesting(y); });
  for (int64_t d = 0; d < rank; ++d) {
    std::vector<Run> runs{{0, globalShape[d]}};
    int64_t extent = globalShape[d], pieces = 1;
    for (size_t a : axes) {
      auto it = sharding.dimOfAxis.find(mesh[a].name);
      if (it == sharding.dimOfAxis.end() || it->second != d)
        continue;
      int64_t size = mesh[a].size, coord = coords[a];
      bool balanced = mesh[a].name == sharding.balancedAxis;
      int64_t cuts = balanced ? 2 * size : size;
      pieces *= cuts;
      if (extent % cuts != 0)
        return Status::invalidInput(
            "dim " + std::to_string(d) + " of extent " +
            std::to_string(globalShape[d]) + " does not split into " +
            std::to_string(pieces) +
            (balanced ? " balanced chunks" : " shards"));
      int64_t piece = extent / cuts;
      std::vector<Run> mine = selectRuns(runs, coord * piece, piece);
      if (balanced) {
        std::vector<Run> second =
            selectRuns(runs, (2 * size - 1 - coord) * piece, piece);
        mine.insert(mine.end(), second.begin(), second.end());
      }
      runs = joinRuns(mine);
      extent = balanced ? 2 * piece : piece;
    }
    slice.localShape[d] = extent;
    slice.start[d] = runs.front().globalStart;
    slice.runs.push_back(std::move(runs));
  }
  return slice;
}

int64_t stageOfRank(const std::vector<plan::MeshAxis> &mesh, int64_t rank) {
  std::vector<int64_t> coords = meshCoords(mesh, rank);
  for (size_t a = 0; a < mesh.size(); ++a)
    if (mesh[a].name == plan::kStageAxis)
      return coords[a];
  return -1;
}

bool isShardOwner(const std::vector<plan::MeshAxis> &mesh,
                  const plan::Sharding &sharding,
                  const std::vector<int64_t> &coords) {
  for (size_t a = 0; a < mesh.size(); ++a) {
    // A tensor of one pipeline stage is held by that stage's ranks only.
    if (sharding.stage >= 0 && mesh[a].name == plan::kStageAxis) {
      if (coords[a] != sharding.stage)
        return false;
      continue;
    }
    auto it = sharding.dimOfAxis.find(mesh[a].name);
    bool isSharded = it != sharding.dimOfAxis.end() && it->second >= 0;
    if (!isSharded && coords[a] != 0)
      return false;
  }
  return true;
}

void convertElements(const void *src, DType srcType, void *dst, DType dstType,
                     int64_t count) {
  if (srcType == dstType) {
    std::memcpy(dst, src, static_cast<size_t>(count * dtypeSize(srcType)));
    return;
  }
  kernels::ConstTensorView from{src, srcType};
  kernels::TensorView to{dst, dstType};
  for (int64_t i = 0; i < count; ++i)
    kernels::storeElement(to, i, kernels::loadElement(from, i));
}

void convertElementsInParallel(const void *src, DType srcType, void *dst,
                               DType dstType, int64_t count) {
  constexpr int64_t kChunk = int64_t{1} << 22;
  int64_t chunks = (count + kChunk - 1) / kChunk;
  int64_t threads = std::min<int64_t>(
      std::max(1u, std::thread::hardware_concurrency()), chunks);
  if (threads <= 1) {
    convertElements(src, srcType, dst, dstType, count);
    return;
  }
  auto convertChunks = [&](int64_t first) {
    for (int64_t chunk = first; chunk < chunks; chunk += threads) {
      int64_t begin = chunk * kChunk, length = std::min(kChunk, count - begin);
      convertElements(
          static_cast<const std::byte *>(src) + begin * dtypeSize(srcType),
          srcType, static_cast<std::byte *>(dst) + begin * dtypeSize(dstType),
          dstType, length);
    }
  };
  runShares(threads, convertChunks);
}

bool sameElements(const ShardSlice &a, const ShardSlice &b) {
  if (a.globalShape != b.globalShape || a.localShape != b.localShape ||
      a.start != b.start || a.runs.size() != b.runs.size())
    return false;
  for (size_t d = 0; d < a.runs.size(); ++d) {
    if (a.runs[d].size() != b.runs[d].size())
      return false;
    for (size_t r = 0; r < a.runs[d].size(); ++r)
      if (a.runs[d][r].globalStart != b.runs[d][r].globalStart ||
          a.runs[d][r].length != b.runs[d][r].length)
        return false;
  }
  return true;
}

namespace {
/// Visits the slice one contiguous innermost run at a time, handing the
/// local and global element offsets of the run's first element.
template <typename Fn> void forEachRun(const ShardSlice &slice, Fn &&visit) {
  size_t rank = slice.localShape.size();
  if (rank == 0) {
    visit(int64_t{0}, int64_t{0}, int64_t{1});
    return;
  }
  int64_t rowLength = slice.localShape.back();
  if (rowLength == 0)
    return;
  int64_t numRows = numElements(slice.localShape) / rowLength;
  std::vector<int64_t> globalStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    globalStride[d] = globalStride[d + 1] * slice.globalShape[d + 1];
  std::vector<ShardSlice::Run> oneRun{{slice.start[rank - 1], rowLength}};
  const std::vector<ShardSlice::Run> &inner =
      slice.runs.size() == rank ? slice.runs[rank - 1] : oneRun;
  std::vector<int64_t> index(rank, 0); // local index of the row's start
  for (int64_t row = 0; row < numRows; ++row) {
    int64_t global = 0;
    for (size_t d = 0; d + 1 < rank; ++d)
      global += slice.globalOf(d, index[d]) * globalStride[d];
    int64_t local = row * rowLength;
    for (const ShardSlice::Run &run : inner) {
      visit(local, global + run.globalStart, run.length);
      local += run.length;
    }
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < slice.localShape[d])
        break;
      index[d] = 0;
    }
  }
}
} // namespace

void copyGlobalToLocal(const void *global, DType globalType,
                       const ShardSlice &slice, void *local, DType localType) {
  auto *from = static_cast<const std::byte *>(global);
  auto *to = static_cast<std::byte *>(local);
  int64_t fromSize = dtypeSize(globalType), toSize = dtypeSize(localType);
  forEachRun(slice, [&](int64_t localAt, int64_t globalAt, int64_t count) {
    convertElements(from + globalAt * fromSize, globalType,
                    to + localAt * toSize, localType, count);
  });
}

namespace {
/// Visits the runs of a slice clipped to global elements [begin, end).
template <typename Fn>
void forEachRunIn(const ShardSlice &slice, int64_t begin, int64_t end,
                  Fn &&visit) {
  forEachRun(slice, [&](int64_t localAt, int64_t globalAt, int64_t count) {
    int64_t from = std::max(globalAt, begin);
    int64_t to = std::min(globalAt + count, end);
    if (from < to)
      visit(localAt + (from - globalAt), from, to - from);
  });
}
} // namespace

LocalSpan localSpanOf(const ShardSlice &slice, int64_t globalBegin,
                      int64_t globalEnd) {
  LocalSpan span{std::numeric_limits<int64_t>::max(), 0};
  forEachRunIn(slice, globalBegin, globalEnd,
               [&](int64_t localAt, int64_t, int64_t count) {
                 span.begin = std::min(span.begin, localAt);
                 span.end = std::max(span.end, localAt + count);
               });
  return span.begin < span.end ? span : LocalSpan{};
}

void copyLocalRangeToGlobal(const void *local, DType localType,
                            int64_t localBegin, const ShardSlice &slice,
                            int64_t globalBegin, int64_t globalEnd,
                            void *global, DType globalType) {
  auto *from = static_cast<const std::byte *>(local);
  auto *to = static_cast<std::byte *>(global);
  int64_t fromSize = dtypeSize(localType), toSize = dtypeSize(globalType);
  forEachRunIn(slice, globalBegin, globalEnd,
               [&](int64_t localAt, int64_t globalAt, int64_t count) {
                 convertElements(
                     from + (localAt - localBegin) * fromSize, localType,
                     to + (globalAt - globalBegin) * toSize, globalType, count);
               });
}

void copyLocalToGlobal(const void *local, DType localType,
                       const ShardSlice &slice, void *global,
                       DType globalType) {
  copyLocalRangeToGlobal(local, localType, 0, slice, 0,
                         numElements(slice.globalShape), global, globalType);
}

} // namespace sharc::exec
