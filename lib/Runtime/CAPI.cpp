//===- CAPI.cpp - the runtime's C API ---------------------------*- C++ -*-===//
//
// include/accrue-c/Runtime.h over the Session: each entry catches every
// exception and turns it into an AccrueError, with settings named as the
// C API spells them.
//
//===----------------------------------------------------------------------===//

#include "accrue-c/Runtime.h"

#include "accrue-runtime/Runtime.h"

#include <cstring>
#include <memory>
#include <new>

using namespace accrue::rt;

struct AccrueError {
  std::string message;
};

struct AccrueArtifact {
  std::shared_ptr<const Artifact> artifact;
  std::vector<const ArgSpec *> inputs;
  /// The memory plan and the kernel report as JSON (empty without one).
  std::string memoryPlan, kernelReport;
};

struct AccrueDataset {
  std::map<std::string, Array> arrays;
  /// Set when the arrays came from a file: how errors name the data.
  std::string what = "the data";
};

struct AccrueSessionOptions {
  SessionOptions options;
};

struct AccrueSession {
  std::unique_ptr<Session> session;
  std::string lastRecord;
};

namespace {

/// Runs `body`; on an exception stores its message in `*error` (if given)
/// and returns `failed`.
template <typename T, typename Body>
T guarded(AccrueError **error, T failed, Body &&body) {
  try {
    return body();
  } catch (const std::exception &e) {
    if (error)
      *error = new (std::nothrow) AccrueError{renderSettings(
          e.what(), [](const std::string &name) { return name; })};
    return failed;
  }
}

/// `type` checked: a C caller may pass any int.
DType dtypeOf(AccrueDType type) {
  if (static_cast<int>(type) < 0 ||
      static_cast<int>(type) >= accrueDTypeCount())
    throw Error("unknown dtype " + std::to_string(static_cast<int>(type)));
  return type;
}

} // namespace

extern "C" {

const char *accrueErrorMessage(const AccrueError *error) {
  return error ? error->message.c_str() : "";
}

void accrueErrorDestroy(AccrueError *error) { delete error; }

AccrueError *accrueErrorCreate(const char *message) {
  return new (std::nothrow) AccrueError{message ? message : ""};
}

AccrueArtifact *accrueArtifactOpen(const char *directory, AccrueError **error) {
  return guarded<AccrueArtifact *>(error, nullptr, [&] {
    if (!directory)
      throw Error("no artifact directory given");
    auto result = std::make_unique<AccrueArtifact>();
    result->artifact = std::make_shared<const Artifact>(directory);
    result->inputs = result->artifact->batchInputs();
    if (result->artifact->memoryPlan)
      result->memoryPlan = memoryPlanJsonText(*result->artifact->memoryPlan);
    if (result->artifact->kernelReport)
      result->kernelReport = *result->artifact->kernelReport;
    return result.release();
  });
}

void accrueArtifactDestroy(AccrueArtifact *artifact) { delete artifact; }

int accrueArtifactCheckFiles(const AccrueArtifact *artifact,
                             AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!artifact)
      throw Error("no artifact given");
    artifact->artifact->checkFiles();
    return 0;
  });
}

const char *accrueArtifactMemoryPlan(const AccrueArtifact *artifact) {
  return artifact->memoryPlan.empty() ? nullptr : artifact->memoryPlan.c_str();
}

const char *accrueArtifactKernelReport(const AccrueArtifact *artifact) {
  return artifact->kernelReport.empty() ? nullptr
                                        : artifact->kernelReport.c_str();
}

int64_t accrueArtifactMicroBatch(const AccrueArtifact *artifact) {
  return artifact->artifact->microBatch;
}

int accrueArtifactNumInputs(const AccrueArtifact *artifact) {
  return static_cast<int>(artifact->inputs.size());
}

const char *accrueArtifactInputName(const AccrueArtifact *artifact, int index) {
  if (index < 0 || index >= accrueArtifactNumInputs(artifact))
    return nullptr;
  return artifact->inputs[index]->name.c_str();
}

const char *accrueArtifactInputDType(const AccrueArtifact *artifact,
                                     int index) {
  if (index < 0 || index >= accrueArtifactNumInputs(artifact))
    return nullptr;
  return dtypeName(artifact->inputs[index]->dtype);
}

int accrueArtifactInputRank(const AccrueArtifact *artifact, int index) {
  if (index < 0 || index >= accrueArtifactNumInputs(artifact))
    return -1;
  return static_cast<int>(artifact->inputs[index]->shape.size());
}

const int64_t *accrueArtifactInputShape(const AccrueArtifact *artifact,
                                        int index) {
  if (index < 0 || index >= accrueArtifactNumInputs(artifact))
    return nullptr;
  return artifact->inputs[index]->shape.data();
}

int accrueArtifactNumParameters(const AccrueArtifact *artifact) {
  return static_cast<int>(artifact->artifact->params.size());
}

const char *accrueArtifactParameterName(const AccrueArtifact *artifact,
                                        int index) {
  if (index < 0 || index >= accrueArtifactNumParameters(artifact))
    return nullptr;
  return artifact->artifact->params[index].name.c_str();
}

int accrueArtifactParameterRank(const AccrueArtifact *artifact, int index) {
  if (index < 0 || index >= accrueArtifactNumParameters(artifact))
    return -1;
  return static_cast<int>(artifact->artifact->params[index].shape.size());
}

const int64_t *accrueArtifactParameterShape(const AccrueArtifact *artifact,
                                            int index) {
  if (index < 0 || index >= accrueArtifactNumParameters(artifact))
    return nullptr;
  return artifact->artifact->params[index].shape.data();
}

int accrueArtifactNumBuffers(const AccrueArtifact *artifact) {
  return static_cast<int>(artifact->artifact->buffers.size());
}

const char *accrueArtifactBufferName(const AccrueArtifact *artifact,
                                     int index) {
  if (index < 0 || index >= accrueArtifactNumBuffers(artifact))
    return nullptr;
  return artifact->artifact->buffers[index].name.c_str();
}

int accrueArtifactBufferRank(const AccrueArtifact *artifact, int index) {
  if (index < 0 || index >= accrueArtifactNumBuffers(artifact))
    return -1;
  return static_cast<int>(artifact->artifact->buffers[index].shape.size());
}

const int64_t *accrueArtifactBufferShape(const AccrueArtifact *artifact,
                                         int index) {
  if (index < 0 || index >= accrueArtifactNumBuffers(artifact))
    return nullptr;
  return artifact->artifact->buffers[index].shape.data();
}

AccrueDataset *accrueDatasetCreate(void) {
  return new (std::nothrow) AccrueDataset();
}

AccrueDataset *accrueDatasetOpenNpz(const char *path, AccrueError **error) {
  return guarded<AccrueDataset *>(error, nullptr, [&] {
    if (!path)
      throw Error("no data file given");
    auto dataset = std::make_unique<AccrueDataset>();
    dataset->arrays = readNpz(path);
    dataset->what = std::string("'") + path + "'";
    return dataset.release();
  });
}

void accrueDatasetDestroy(AccrueDataset *dataset) { delete dataset; }

int accrueDatasetAddArray(AccrueDataset *dataset, const char *name,
                          AccrueDType dtype, const int64_t *shape, int rank,
                          const void *data, AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!dataset || !name || (rank > 0 && !shape) || rank < 1)
      throw Error("an array needs a name and a shape of rank 1 or more");
    Array array;
    array.dtype = dtypeOf(dtype);
    array.shape.assign(shape, shape + rank);
    for (int64_t extent : array.shape)
      if (extent < 0)
        throw Error(std::string("array '") + name + "' has a negative extent");
    size_t bytes = array.numElements() * dtypeSize(array.dtype);
    if (bytes && !data)
      throw Error(std::string("array '") + name + "' has no data");
    array.data.assign(static_cast<const uint8_t *>(data),
                      static_cast<const uint8_t *>(data) + bytes);
    if (!dataset->arrays.emplace(name, std::move(array)).second)
      throw Error(std::string("the data already has an array '") + name + "'");
    return 0;
  });
}

AccrueSessionOptions *accrueSessionOptionsCreate(void) {
  return new (std::nothrow) AccrueSessionOptions();
}

void accrueSessionOptionsDestroy(AccrueSessionOptions *options) {
  delete options;
}

int accrueSessionOptionsSet(AccrueSessionOptions *options, const char *name,
                            const char *value, AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!options || !name || !value)
      throw Error("a setting needs a name and a value");
    options->options.set(name, value);
    return 0;
  });
}

int accrueSessionOptionsValidate(const AccrueSessionOptions *options,
                                 AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!options)
      throw Error("no session options given");
    options->options.validate();
    return 0;
  });
}

int accrueSessionOptionsNumSettings(void) {
  return static_cast<int>(SessionOptions::settingNames().size());
}

const char *accrueSessionOptionsSettingName(int index) {
  if (index < 0 || index >= accrueSessionOptionsNumSettings())
    return nullptr;
  return SessionOptions::settingNames()[index].c_str();
}

AccrueSession *accrueSessionCreate(const AccrueArtifact *artifact,
                                   const AccrueDataset *data,
                                   const AccrueSessionOptions *options,
                                   AccrueError **error) {
  return guarded<AccrueSession *>(error, nullptr, [&] {
    if (!artifact || !data)
      throw Error("a session needs an artifact and data");
    SessionOptions settings = options ? options->options : SessionOptions();
    settings.validate();
    if (artifact->artifact->dataParallel())
      Collectives::get();
    auto result = std::make_unique<AccrueSession>();
    result->session = std::make_unique<Session>(
        artifact->artifact,
        Dataset::fromArrays(data->arrays, *artifact->artifact, data->what),
        settings);
    return result.release();
  });
}

void accrueSessionDestroy(AccrueSession *session) { delete session; }

int64_t accrueSessionPlannedSteps(const AccrueSession *session) {
  return session->session->plannedSteps();
}

int64_t accrueSessionIterations(const AccrueSession *session) {
  return session->session->iterations();
}

int accrueSessionStep(AccrueSession *session, AccrueStepMetrics *metrics,
                      AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    StepRecord record = session->session->step();
    session->lastRecord = record.json;
    if (metrics) {
      const StepMetrics &m = record.metrics;
      metrics->iteration = record.iteration;
      metrics->optimizerSteps = m.step;
      metrics->loss = m.loss;
      metrics->gradNorm = m.gradNorm;
      metrics->lr = m.lr;
      metrics->samples = m.samples;
      metrics->lossScale = m.lossScale;
      metrics->skipped = m.skipped;
      metrics->milliseconds = record.milliseconds;
    }
    return 0;
  });
}

const char *accrueSessionLastRecord(const AccrueSession *session) {
  return session->lastRecord.c_str();
}

int accrueSessionSetData(AccrueSession *session, const AccrueDataset *data,
                         AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!data)
      throw Error("no data given");
    const Artifact &artifact = session->session->artifact();
    session->session->setData(
        Dataset::fromArrays(data->arrays, artifact, data->what));
    return 0;
  });
}

int accrueSetCollectives(const AccrueHostCollectives *collectives,
                         AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!collectives || collectives->size < 1 || collectives->rank < 0 ||
        collectives->rank >= collectives->size ||
        !collectives->all_reduce_sum || !collectives->all_reduce_extremum ||
        !collectives->broadcast)
      throw Error("accrueSetCollectives: a rank in [0, size) and all three "
                  "functions are needed");
    AccrueHostCollectives c = *collectives;
    auto check = [](int status, const char *message) {
      if (status)
        throw Error(std::string("the host's collective failed: ") + message);
    };
    Collectives::Host host;
    host.rank = c.rank;
    host.size = c.size;
    host.allReduceSum = [c, check](float *data, int64_t count) {
      char message[1024] = {};
      check(c.all_reduce_sum(c.context, data, count, message, sizeof message),
            message);
    };
    host.allReduceExtremum = [c, check](int64_t *data, int64_t count,
                                        bool max) {
      char message[1024] = {};
      check(c.all_reduce_extremum(c.context, data, count, max, message,
                                  sizeof message),
            message);
    };
    host.broadcastBytes = [c, check](void *data, int64_t bytes) {
      char message[1024] = {};
      check(c.broadcast(c.context, data, bytes, message, sizeof message),
            message);
    };
    if (c.reduce_scatter_sum && c.all_gather) {
      host.reduceScatterSum = [c, check](float *data,
                                         const std::vector<int64_t> &counts) {
        char message[1024] = {};
        check(c.reduce_scatter_sum(c.context, data, counts.data(), message,
                                   sizeof message),
              message);
      };
      host.allGather = [c, check](float *data,
                                  const std::vector<int64_t> &counts) {
        char message[1024] = {};
        check(c.all_gather(c.context, data, counts.data(), message,
                           sizeof message),
              message);
      };
    }
    Collectives::setHost(std::move(host));
    return 0;
  });
}

int accrueSessionPlanSteps(AccrueSession *session, int64_t total,
                           AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    session->session->planSteps(total);
    return 0;
  });
}

int64_t accrueSessionStepsLeftInPass(const AccrueSession *session) {
  return session->session->stepsLeftInPass();
}

int accrueSessionSaveCheckpointTo(const AccrueSession *session,
                                  const char *path, AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!path)
      throw Error("no path given");
    session->session->saveCheckpointTo(path);
    return 0;
  });
}

int accrueSessionSaveCheckpoint(AccrueSession *session, AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    session->session->saveCheckpoint();
    return 0;
  });
}

int accrueSessionExportOnnx(const AccrueSession *session, const char *path,
                            AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!path)
      throw Error("no path given");
    session->session->exportOnnx(path);
    return 0;
  });
}

int accrueSessionSaveGradients(const AccrueSession *session, const char *path,
                               AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!path)
      throw Error("no path given");
    session->session->saveGradients(path);
    return 0;
  });
}

int accrueSessionSaveKernelProfile(const AccrueSession *session,
                                   const char *path, AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!path)
      throw Error("no path given");
    session->session->saveKernelProfile(path);
    return 0;
  });
}

int accrueSessionReadParameter(const AccrueSession *session, const char *name,
                               float *values, int64_t count,
                               AccrueError **error) {
  return guarded<int>(error, -1, [&] {
    if (!name)
      throw Error("no parameter name given");
    std::map<std::string, Array> params =
        session->session->state().parameterArrays();
    params.merge(session->session->state().bufferArrays());
    auto found = params.find(name);
    if (found == params.end())
      throw Error(std::string("the artifact has no parameter or buffer '") +
                  name + "'");
    const Array &array = found->second;
    if (count < array.numElements() || (array.numElements() && !values))
      throw Error(std::string("parameter '") + name + "' has " +
                  std::to_string(array.numElements()) +
                  " elements; the buffer has room for " +
                  std::to_string(count));
    std::memcpy(values, array.data.data(), array.data.size());
    return 0;
  });
}

} // extern "C"
