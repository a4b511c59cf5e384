//===- Checkpoint.cpp - save and restore a training run ---------*- C++ -*-===//
//
// A checkpoint is one safetensors file: every parameter and buffer (running
// statistics) under its name, every optimizer state tensor as
// "<state>/<parameter>", and string metadata
// (format, step count, optimizer, a CRC-32 of the tensor bytes, and the
// caller's "run." entries). It is written to a temporary file, fsynced and
// renamed, so a crash leaves the previous checkpoint intact.
//
// A run whose optimizer state is sharded over G ranks (ZeRO) writes a set:
// each rank its shard of every state arena, flat, to
// "<checkpoint>.shard-R-of-G", then (after every rank has written) rank 0
// the checkpoint itself, whose "optimizer_shards" says G. The checkpoint
// is written last, so it exists only when its whole set does. Any number
// of ranks, sharded or not, resumes from either form: each reads the
// elements of the state it keeps from the shards that hold them.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/Collectives.h"
#include "accrue-runtime/Trainer.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>

using namespace accrue::rt;

namespace {

constexpr const char *kFormat = "accrue-checkpoint";
constexpr const char *kVersion = "1";

/// The named slice of an arena, in place.
TensorRef slice(const std::string &name, const float *arena,
                const ParamSpec &param) {
  return {name, ACCRUE_DTYPE_FLOAT32, param.shape, arena + param.offset,
          static_cast<size_t>(param.numel) * sizeof(float)};
}

uint32_t checksum(const std::vector<TensorRef> &tensors) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const TensorRef &tensor : tensors) {
    crc = crc32(crc, reinterpret_cast<const Bytef *>(tensor.name.data()),
                static_cast<uInt>(tensor.name.size()));
    const auto *data = static_cast<const uint8_t *>(tensor.data);
    size_t left = tensor.bytes;
    while (left) {
      uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
      crc = crc32(crc, data, chunk);
      data += chunk;
      left -= chunk;
    }
  }
  return static_cast<uint32_t>(crc);
}

/// Where rank `rank` of `ranks` writes its shard of a checkpoint's state.
std::string shardPath(const std::string &checkpoint, int64_t rank,
                      int64_t ranks) {
  std::string base = checkpoint;
  const std::string suffix = ".safetensors";
  if (base.size() > suffix.size() &&
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
    base.resize(base.size() - suffix.size());
  return base + ".shard-" + std::to_string(rank) + "-of-" +
         std::to_string(ranks) + suffix;
}

} // namespace

bool Trainer::shardsCheckpoints() const {
  return art->shardOptimizer && Collectives::get().size() > 1;
}

void Trainer::saveCheckpoint(
    const std::string &path,
    const std::map<std::string, std::string> &run) const {
  // Host copies of the arenas (device targets keep them on the device): a
  // rank that writes only its shard of a set copies only its states.
  bool shardOnly = shardsCheckpoints() && Collectives::get().rank() != 0;
  std::vector<const Buffer *> arenas;
  if (!shardOnly)
    arenas = {&paramArena, &bufferArena};
  for (const Buffer &state : stateArenas)
    arenas.push_back(&state);
  std::vector<std::vector<float>> states = hostCopies(arenas);
  std::vector<float> params, buffers;
  if (!shardOnly) {
    params = std::move(states[0]);
    buffers = std::move(states[1]);
    states.erase(states.begin(), states.begin() + 2);
  }
  std::vector<TensorRef> tensors;
  if (!shardOnly) {
    for (const ParamSpec &param : art->params)
      tensors.push_back(slice(param.name, params.data(), param));
    for (const ParamSpec &buffer : art->buffers)
      tensors.push_back(slice(buffer.name, buffers.data(), buffer));
  }
  std::vector<std::string> names = art->stateNames();
  std::map<std::string, std::string> metadata;
  if (shardsCheckpoints()) {
    // This rank's shard first, then, once every rank has written its own,
    // the checkpoint (rank 0).
    Collectives &c = Collectives::get();
    std::vector<TensorRef> shard;
    for (size_t s = 0; s < states.size(); ++s)
      shard.push_back({names[s],
                       ACCRUE_DTYPE_FLOAT32,
                       {stateSize},
                       states[s].data(),
                       static_cast<size_t>(stateSize) * sizeof(float)});
    std::map<std::string, std::string> shardMetadata = {
        {"format", kFormat},
        {"version", kVersion},
        {"step", std::to_string(completed)},
        {"shard", std::to_string(c.rank()) + "/" + std::to_string(c.size())},
        {"begin", std::to_string(stateBegin)},
        {"arena_size", std::to_string(art->arenaSize)},
        {"crc32", std::to_string(checksum(shard))}};
    writeSafetensors(shardPath(path, c.rank(), c.size()), shard, shardMetadata);
    if (!c.agree(completed))
      throw Error("checkpoint '" + path +
                  "': the ranks are at different steps");
    if (shardOnly)
      return;
    metadata["optimizer_shards"] = std::to_string(c.size());
  } else {
    for (size_t s = 0; s < states.size(); ++s)
      for (const ParamSpec &param : art->params)
        tensors.push_back(
            slice(names[s] + "/" + param.name, states[s].data(), param));
  }

  for (const auto &[key, value] : run)
    metadata["run." + key] = value;
  metadata["format"] = kFormat;
  metadata["version"] = kVersion;
  metadata["step"] = std::to_string(completed);
  {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g %lld", scale,
                  static_cast<long long>(streak));
    metadata["loss_scale"] = text;
  }
  metadata["optimizer"] = accrueOptimizerName(art->optimizer.kind);
  metadata["crc32"] = std::to_string(checksum(tensors));
  writeSafetensors(path, tensors, metadata);
}

std::map<std::string, std::string>
Trainer::loadCheckpoint(const std::string &path) {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Array> arrays;
  try {
    arrays = readSafetensors(path, &metadata);
  } catch (const Error &e) {
    throw Error(std::string("checkpoint ") + e.what());
  }
  auto bad = [&](const std::string &why) {
    return Error("checkpoint '" + path + "' " + why);
  };
  if (metadata["format"] != kFormat)
    throw bad("is not an Accrue checkpoint");
  if (metadata["version"] != kVersion)
    throw bad("has format version '" + metadata["version"] +
              "'; this runtime reads version " + kVersion);
  std::string optimizer = accrueOptimizerName(art->optimizer.kind);
  if (metadata["optimizer"] != optimizer)
    throw bad("was written for optimizer '" + metadata["optimizer"] +
              "', but the artifact uses '" + optimizer + "'");

  std::vector<TensorRef> tensors;
  auto find = [&](const std::string &name,
                  const ParamSpec &param) -> const Array & {
    auto it = arrays.find(name);
    if (it == arrays.end())
      throw bad("has no tensor '" + name + "' (written for another model?)");
    if (it->second.dtype != ACCRUE_DTYPE_FLOAT32 ||
        it->second.shape != param.shape)
      throw bad("tensor '" + name + "' does not match the artifact's shape");
    tensors.push_back(TensorRef::of(name, it->second));
    return it->second;
  };
  for (const ParamSpec &param : art->params)
    find(param.name, param);
  for (const ParamSpec &buffer : art->buffers)
    find(buffer.name, buffer);
  std::vector<std::string> names = art->stateNames();
  int64_t shards = 0;
  if (metadata.count("optimizer_shards")) {
    try {
      shards = std::stoll(metadata["optimizer_shards"]);
    } catch (const std::exception &) {
    }
    if (shards < 1 || shards > (int64_t(1) << 20))
      throw bad("has a corrupt shard count");
  } else {
    for (const std::string &state : names)
      for (const ParamSpec &param : art->params)
        find(state + "/" + param.name, param);
  }
  if (tensors.size() != arrays.size())
    throw bad("holds tensors the artifact does not have (written for another "
              "model?)");
  if (metadata["crc32"] != std::to_string(checksum(tensors)))
    throw bad("is corrupt (checksum mismatch)");
  int64_t step;
  double savedScale = scale;
  long long savedStreak = streak;
  try {
    step = std::stoll(metadata["step"]);
    if (metadata.count("loss_scale") &&
        std::sscanf(metadata["loss_scale"].c_str(), "%lf %lld", &savedScale,
                    &savedStreak) != 2)
      throw bad("has a corrupt loss scale");
  } catch (const std::invalid_argument &) {
    throw bad("has a corrupt step count");
  } catch (const std::out_of_range &) {
    throw bad("has a corrupt step count");
  }

  // The elements of the states this process keeps, from the shards that
  // hold them (each checked whole first).
  std::vector<std::vector<float>> kept(names.size());
  if (shards) {
    for (std::vector<float> &state : kept)
      state.assign(stateSize, 0.0f);
    for (int64_t r = 0; r < shards; ++r) {
      int64_t begin, size;
      accrueShard(art->arenaSize, r, shards, &begin, &size);
      int64_t from = std::max(begin, stateBegin);
      int64_t to = std::min(begin + size, stateBegin + stateSize);
      if (from >= to)
        continue;
      std::string file = shardPath(path, r, shards);
      std::map<std::string, std::string> shardMetadata;
      std::map<std::string, Array> shard;
      try {
        shard = readSafetensors(file, &shardMetadata);
      } catch (const Error &e) {
        throw Error("checkpoint shard " + std::string(e.what()) +
                    " (a checkpoint of a sharded optimizer state is a set: "
                    "'" +
                    path + "' and one shard per rank beside it)");
      }
      auto badShard = [&](const std::string &why) {
        return Error("checkpoint shard '" + file + "' " + why);
      };
      if (shardMetadata["format"] != kFormat ||
          shardMetadata["step"] != metadata["step"] ||
          shardMetadata["begin"] != std::to_string(begin) ||
          shardMetadata["arena_size"] != std::to_string(art->arenaSize))
        throw badShard("does not belong to '" + path +
                       "' (another step, model or rank count)");
      std::vector<TensorRef> refs;
      for (const std::string &state : names) {
        auto it = shard.find(state);
        if (it == shard.end() || it->second.dtype != ACCRUE_DTYPE_FLOAT32 ||
            it->second.shape != std::vector<int64_t>{size})
          throw badShard("has no tensor '" + state + "' of " +
                         std::to_string(size) + " floats");
        refs.push_back(TensorRef::of(state, it->second));
      }
      if (shardMetadata["crc32"] != std::to_string(checksum(refs)))
        throw badShard("is corrupt (checksum mismatch)");
      for (size_t s = 0; s < names.size(); ++s)
        std::memcpy(
            kept[s].data() + (from - stateBegin),
            reinterpret_cast<const float *>(shard.at(names[s]).data.data()) +
                (from - begin),
            (to - from) * sizeof(float));
    }
  } else {
    for (size_t s = 0; s < names.size(); ++s) {
      std::vector<float> whole(art->arenaSize, 0.0f);
      for (const ParamSpec &param : art->params)
        std::memcpy(whole.data() + param.offset,
                    arrays.at(names[s] + "/" + param.name).data.data(),
                    param.numel * sizeof(float));
      kept[s].assign(whole.begin() + stateBegin,
                     whole.begin() + stateBegin + stateSize);
    }
  }

  // Everything checked: restore, arena by arena.
  auto restore = [&](Buffer &arena, const std::string &prefix,
                     const std::vector<ParamSpec> &slots) {
    std::vector<float> values(arena.bytes() / sizeof(float), 0.0f);
    for (const ParamSpec &param : slots)
      std::memcpy(values.data() + param.offset,
                  arrays.at(prefix + param.name).data.data(),
                  param.numel * sizeof(float));
    exec->upload(arena.data(), values.data(), arena.bytes());
    exec->synchronize();
  };
  restore(paramArena, "", art->params);
  if (!art->buffers.empty())
    restore(bufferArena, "", art->buffers);
  for (size_t s = 0; s < names.size(); ++s) {
    exec->upload(stateArenas[s].data(), kept[s].data(),
                 kept[s].size() * sizeof(float));
    exec->synchronize();
  }
  exec->fillZero(gradArena.data(), gradArena.bytes());
  completed = step;
  scale = savedScale;
  streak = savedStreak;
  // A step that keeps this state on the device gets it with the next call.
  deviceStateStale = true;

  std::map<std::string, std::string> run;
  for (const auto &[key, value] : metadata)
    if (key.rfind("run.", 0) == 0)
      run[key.substr(4)] = value;
  return run;
}
