//===- ModelBuilder.cpp - the forward program -----------------------------===//

#include "ir/frontend/ModelBuilder.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace sharc;
using frontend::Config;
using frontend::SourceLoc;

namespace {

/// Builds @train_step op by op; parameters become function arguments in
/// the order they are first used.
class ForwardBuilder {
public:
  ForwardBuilder(MLIRContext *context, const Config &config)
      : context(context), config(config), builder(context),
        model(config.model) {
    elementType = config.run.dtype.value != "float32"
                      ? Type(builder.getBF16Type())
                      : Type(builder.getF32Type());
    seqLen = config.run.seqLen.value;
    // The program is one microbatch's; sharc-microbatch runs it on each
    // slice of the step's batch.
    batch = config.run.microBatchSize.value;
  }

  OwningOpRef<ModuleOp> build(const BuildOptions &options);

private:
  Location loc(const SourceLoc &where) {
    return FileLineColLoc::get(context, where.file, where.line, where.col);
  }
  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elementType);
  }

  /// Declares a parameter argument; `init` is "normal" or "ones", `role`
  /// what the parameter is to the sharding passes (kRoleAttr).
  Value param(const std::string &name, ArrayRef<int64_t> shape, StringRef init,
              StringRef role, Location where);
  Value linear(Value x, const std::string &name, int64_t out, StringRef role,
               Location where);
  Value rmsNorm(Value x, const std::string &name, int64_t size, StringRef role,
                Location where);
  /// One layer; `untilAttention`: only up to its attention's output (the
  /// last layer of a prefill, which only fills the caches).
  Value block(Value h, int64_t layer, bool untilAttention = false);
  /// tokens -> embedding -> layers of a decode step of tokens' rows, at
  /// positions; the prefill stops at the last layer's attention.
  Value decodeLayers(Value embed, Value tokens, Value positionsIn,
                     bool prefill);
  /// Declares a key/value cache argument [seqLen, batch, width] (decode).
  Value cache(const std::string &name, int64_t width, Location where);
  /// Attention of a decode step: decode_attention over the layer's caches.
  Value decodeAttention(Value q, Value k, Value v, const std::string &attn,
                        Location where);

  MLIRContext *context;
  const Config &config;
  OpBuilder builder;
  const frontend::ModelConfig &model;
  Type elementType;
  int64_t seqLen, batch;
  /// A decode step: one position per sample, its `positions` input, and
  /// each cache's update with the argument it updates (the step's; a
  /// prefill's write the same caches in place, unreturned).
  bool decode = false;
  bool buildingPrefill = false;
  Value positions;
  SmallVector<std::pair<Value, unsigned>> cacheUpdates;
  /// Each parameter's and cache's argument, by name: a prefill reads the
  /// step's.
  llvm::StringMap<Value> namedArgs;
  func::FuncOp func;
  Block *body = nullptr;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
};

Value ForwardBuilder::param(const std::string &name, ArrayRef<int64_t> shape,
                            StringRef init, StringRef role, Location where) {
  if (Value known = namedArgs.lookup(name))
    return known;
  SmallVector<NamedAttribute> attrs{
      builder.getNamedAttr(kParamAttr, builder.getStringAttr(name)),
      builder.getNamedAttr(kInitAttr, builder.getStringAttr(init)),
      builder.getNamedAttr(kRoleAttr, builder.getStringAttr(role))};
  if (init == "normal")
    attrs.push_back(builder.getNamedAttr(
        kInitStdAttr, builder.getF64FloatAttr(model.initStd.value)));
  argTypes.push_back(tensor(shape));
  argAttrs.push_back(builder.getDictionaryAttr(attrs));
  return namedArgs[name] = body->addArgument(argTypes.back(), where);
}

Value ForwardBuilder::linear(Value x, const std::string &name, int64_t out,
                             StringRef role, Location where) {
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t in = xType.getShape().back();
  Value w = param(name + ".weight", {out, in}, "normal", role, where);
  return builder.create<MatmulOp>(where, x, w);
}

Value ForwardBuilder::rmsNorm(Value x, const std::string &name, int64_t size,
                              StringRef role, Location where) {
  Value w = param(name + ".weight", {size}, "ones", role, where);
  return builder.create<RmsNormOp>(
      where, x, w, builder.getF64FloatAttr(model.rmsNormEps.value));
}

Value ForwardBuilder::cache(const std::string &name, int64_t width,
                            Location where) {
  if (Value known = namedArgs.lookup(name))
    return known;
  argTypes.push_back(tensor({seqLen, batch, width}));
  argAttrs.push_back(builder.getDictionaryAttr(
      builder.getNamedAttr(kCacheAttr, builder.getStringAttr(name))));
  return namedArgs[name] = body->addArgument(argTypes.back(), where);
}

Value ForwardBuilder::decodeAttention(Value q, Value k, Value v,
                                      const std::string &attn, Location where) {
  int64_t kvWidth = cast<RankedTensorType>(k.getType()).getShape().back();
  Location seqLoc = loc(config.run.seqLen.loc);
  Value kCache = cache(attn + ".k_cache", kvWidth, seqLoc);
  Value vCache = cache(attn + ".v_cache", kvWidth, seqLoc);
  auto op = builder.create<DecodeAttentionOp>(
      where, q.getType(), kCache.getType(), vCache.getType(), q, k, v, kCache,
      vCache, positions, builder.getI64IntegerAttr(model.headDim.value),
      builder.getF64FloatAttr(model.ropeTheta.value));
  if (!buildingPrefill)
    for (auto [update, arg] :
         {std::pair{op.getNewKCache(), kCache}, {op.getNewVCache(), vCache}})
      cacheUpdates.push_back({update, cast<BlockArgument>(arg).getArgNumber()});
  return op.getOut();
}

Value ForwardBuilder::decodeLayers(Value embed, Value tokens, Value positionsIn,
                                   bool prefill) {
  buildingPrefill = prefill;
  positions = positionsIn;
  Value h =
      builder.create<EmbeddingOp>(loc(model.vocabSize.loc), embed, tokens,
                                  builder.getI64IntegerAttr(0), StringAttr());
  int64_t layers = model.numLayers.value;
  for (int64_t layer = 0; layer < layers; ++layer)
    h = block(h, layer, prefill && layer + 1 == layers);
  buildingPrefill = false;
  return h;
}

Value ForwardBuilder::block(Value h, int64_t layer, bool untilAttention) {
  std::string prefix = "layers." + std::to_string(layer);
  int64_t hidden = model.hiddenSize.value, headDim = model.headDim.value;
  int64_t qWidth = model.numHeads.value * headDim;
  int64_t kvWidth = model.numKvHeads.value * headDim;
  Location attnLoc = loc(model.numHeads.loc);
  Location mlpLoc = loc(model.intermediateSize.loc);
  Location hiddenLoc = loc(model.hiddenSize.loc);

  Value x =
      rmsNorm(h, prefix + ".input_layernorm", hidden, kRoleNorm, hiddenLoc);
  std::string attn = prefix + ".self_attn";
  Value q = linear(x, attn + ".q_proj", qWidth, kRoleColumn, attnLoc);
  Value k = linear(x, attn + ".k_proj", kvWidth, kRoleColumn,
                   loc(model.numKvHeads.loc));
  Value v = linear(x, attn + ".v_proj", kvWidth, kRoleColumn,
                   loc(model.numKvHeads.loc));
  Location headLoc = loc(model.headDim.loc);
  q = rmsNorm(q, attn + ".q_norm", headDim, kRoleHeadNorm, headLoc);
  k = rmsNorm(k, attn + ".k_norm", headDim, kRoleHeadNorm, headLoc);
  Value attended;
  if (decode) {
    attended = decodeAttention(q, k, v, attn, attnLoc);
    if (untilAttention)
      return attended;
  } else {
    auto headDimAttr = builder.getI64IntegerAttr(headDim);
    auto thetaAttr = builder.getF64FloatAttr(model.ropeTheta.value);
    auto zero = builder.getI64IntegerAttr(0);
    Location ropeLoc = loc(model.ropeTheta.loc);
    // Dense: whole sequences, no position_axis (spmdize sets it on a split).
    StringAttr wholeSequence;
    q = builder.create<RopeOp>(ropeLoc, q, headDimAttr, thetaAttr, zero,
                               wholeSequence, wholeSequence);
    k = builder.create<RopeOp>(ropeLoc, k, headDimAttr, thetaAttr, zero,
                               wholeSequence, wholeSequence);
    attended = builder
                   .create<AttentionOp>(attnLoc, q, k, v, headDimAttr,
                                        wholeSequence, wholeSequence)
                   .getOut();
  }
  Value o = linear(attended, attn + ".o_proj", hidden, kRoleRow, attnLoc);
  h = builder.create<AddOp>(hiddenLoc, h, o);

  x = rmsNorm(h, prefix + ".post_attention_layernorm", hidden, kRoleNorm,
              hiddenLoc);
  std::string mlp = prefix + ".mlp";
  int64_t intermediate = model.intermediateSize.value;
  Value gate = linear(x, mlp + ".gate_proj", intermediate, kRoleColumn, mlpLoc);
  Value up = linear(x, mlp + ".up_proj", intermediate, kRoleColumn, mlpLoc);
  Value act = builder.create<SwigluOp>(mlpLoc, gate, up);
  Value down = linear(act, mlp + ".down_proj", hidden, kRoleRow, mlpLoc);
  return builder.create<AddOp>(hiddenLoc, h, down);
}

OwningOpRef<ModuleOp> ForwardBuilder::build(const BuildOptions &options) {
  Location modelLoc = loc(model.loc);
  OwningOpRef<ModuleOp> module = ModuleOp::create(modelLoc);
  builder.setInsertionPointToEnd(module->getBody());
  func = builder.create<func::FuncOp>(modelLoc, "train_step",
                                      builder.getFunctionType({}, {}));
  body = func.addEntryBlock();
  builder.setInsertionPointToEnd(body);

  int64_t hidden = model.hiddenSize.value, vocab = model.vocabSize.value;
  Location vocabLoc = loc(model.vocabSize.loc);
  Value embed = param("embed_tokens.weight", {vocab, hidden}, "normal",
                      kRoleEmbedding, vocabLoc);
  decode = options.decode;
  Location seqLoc = loc(config.run.seqLen.loc);
  // A decode step takes one position per sample.
  auto input = [&](StringRef name, int64_t rows) {
    auto idsType = RankedTensorType::get({rows, batch}, builder.getI32Type());
    argTypes.push_back(idsType);
    argAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(kInputAttr, builder.getStringAttr(name))));
    return body->addArgument(idsType, seqLoc);
  };
  int64_t rows = decode ? 1 : seqLen;
  Value tokens = input("tokens", rows);
  Value labels = decode ? Value() : input("labels", rows);
  Value h;
  if (decode) {
    h = decodeLayers(embed, tokens, input("positions", 1), /*prefill=*/false);
  } else {
    h = builder.create<EmbeddingOp>(vocabLoc, embed, tokens,
                                    builder.getI64IntegerAttr(0), StringAttr());
    for (int64_t layer = 0; layer < model.numLayers.value; ++layer)
      h = block(h, layer);
  }
  h = rmsNorm(h, "norm", hidden, kRoleNorm, loc(model.hiddenSize.loc));
  Value logits;
  if (model.tieWordEmbeddings.value)
    logits =
        builder.create<MatmulOp>(loc(model.tieWordEmbeddings.loc), h, embed);
  else
    logits = linear(h, "lm_head", vocab, kRoleLmHead, vocabLoc);
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  auto output = [&](Value value, StringRef name) {
    results.push_back(value);
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr(kOutputAttr, builder.getStringAttr(name))));
  };
  if (!decode)
    output(builder.create<CrossEntropyOp>(
               vocabLoc, RankedTensorType::get({}, builder.getF32Type()),
               logits, labels, builder.getI64IntegerAttr(vocab)),
           "loss");
  if (options.emitLogits || decode)
    output(logits, "logits");
  if (decode && options.prefillRows > 0) {
    int64_t prefillRows = options.prefillRows;
    Value prefillTokens = input("prefill_tokens", prefillRows);
    Value prefillPositions = input("prefill_positions", prefillRows);
    output(decodeLayers(embed, prefillTokens, prefillPositions,
                        /*prefill=*/true),
           "prefill");
  }
  // Each cache's update, written in place by its decode_attention.
  for (auto [update, arg] : cacheUpdates) {
    results.push_back(update);
    resultAttrs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr(kOutputAttr, argAttrs[arg].get(kCacheAttr)),
         builder.getNamedAttr(kUpdateOfAttr, builder.getI64IntegerAttr(arg))}));
  }
  builder.create<func::ReturnOp>(modelLoc, results);
  func.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);

  const frontend::OptimizerConfig &opt = config.run.optimizer;
  SmallVector<NamedAttribute> optimizer{
      builder.getNamedAttr("lr", builder.getF64FloatAttr(opt.lr.value)),
      builder.getNamedAttr("beta1", builder.getF64FloatAttr(opt.beta1.value)),
      builder.getNamedAttr("beta2", builder.getF64FloatAttr(opt.beta2.value)),
      builder.getNamedAttr("eps", builder.getF64FloatAttr(opt.eps.value)),
      builder.getNamedAttr("weight_decay",
                           builder.getF64FloatAttr(opt.weightDecay.value))};
  // Only when it clips, so a run without clipping compiles as before.
  if (opt.gradClip.value > 0)
    optimizer.push_back(builder.getNamedAttr(
        "grad_clip", builder.getF64FloatAttr(opt.gradClip.value)));
  // bf16-mixed: sharc-adamw keeps an fp32 master of every bf16 parameter.
  if (config.run.dtype.value == "bf16-mixed")
    optimizer.push_back(
        builder.getNamedAttr("master_weights", builder.getUnitAttr()));
  module->getOperation()->setAttr(kOptimizerAttr,
                                  builder.getDictionaryAttr(optimizer));
  // The sizes the sharding passes check, each with the YAML place it came
  // from, so that "tp (3) must divide num_key_value_heads (4)" points there.
  SmallVector<NamedAttribute> sizes{
      builder.getNamedAttr("name", builder.getStringAttr(model.name.value))};
  SmallVector<NamedAttribute> places;
  auto record = [&](StringRef key, int64_t value, const SourceLoc &where) {
    sizes.push_back(
        builder.getNamedAttr(key, builder.getI64IntegerAttr(value)));
    places.push_back(builder.getNamedAttr(key, loc(where)));
  };
  record("seq_len", seqLen, config.run.seqLen.loc);
  int64_t numMicrobatches = config.run.numMicrobatches.value;
  record("batch", batch * numMicrobatches, config.run.microBatchSize.loc);
  record("vocab_size", vocab, model.vocabSize.loc);
  record("hidden_size", hidden, model.hiddenSize.loc);
  record("num_attention_heads", model.numHeads.value, model.numHeads.loc);
  record("num_key_value_heads", model.numKvHeads.value, model.numKvHeads.loc);
  record("head_dim", model.headDim.value, model.headDim.loc);
  record("num_hidden_layers", model.numLayers.value, model.numLayers.loc);
  record("intermediate_size", model.intermediateSize.value,
         model.intermediateSize.loc);
  // sharc-microbatch splits the batch; one microbatch needs no record (and
  // keeps the IR of every one-microbatch model as it was).
  if (numMicrobatches > 1) {
    record("num_microbatches", numMicrobatches, config.run.numMicrobatches.loc);
    record("micro_batch_size", batch, config.run.microBatchSize.loc);
  }
  module->getOperation()->setAttr(kModelAttr, builder.getDictionaryAttr(sizes));
  module->getOperation()->setAttr(kModelLocsAttr,
                                  builder.getDictionaryAttr(places));
  return module;
}

} // namespace

OwningOpRef<ModuleOp> sharc::buildModel(MLIRContext *context,
                                        const Config &config,
                                        const BuildOptions &options) {
  return ForwardBuilder(context, config).build(options);
}
