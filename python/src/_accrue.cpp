//===- _accrue.cpp - the Python extension over Accrue's C API ---*- C++ -*-===//
//
// A thin layer: every call goes through include/accrue-c (Compiler.h,
// Runtime.h); errors become accrue.AccrueError (a RuntimeError). The
// Python API with its checks is python/accrue/__init__.py.
//
//===----------------------------------------------------------------------===//

#include "accrue-c/Compiler.h"
#include "accrue-c/Runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdio>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

PyObject *accrueErrorType = nullptr;

/// Raises accrue.AccrueError with `error`'s message (and releases it).
[[noreturn]] void raise(AccrueError *error) {
  std::string message = error ? accrueErrorMessage(error) : "unknown error";
  accrueErrorDestroy(error);
  PyErr_SetString(accrueErrorType, message.c_str());
  throw py::error_already_set();
}

using Settings = std::vector<std::pair<std::string, std::string>>;

/// Numpy dtypes the runtime reads.
AccrueDType dtypeOf(const py::array &array, const std::string &name) {
  py::dtype type = array.dtype();
  // The runtime reads native bytes; the package converts others first.
  if (!type.attr("isnative").cast<bool>())
    throw py::value_error("array '" + name + "' has dtype " +
                          std::string(py::str(type)) +
                          ", not in this machine's byte order");
  // Through the attributes, not pybind11's view of numpy's descriptor
  // struct, whose layout numpy 2 changed (the item size moved).
  char kind = type.attr("kind").cast<std::string>().at(0);
  size_t size = type.attr("itemsize").cast<size_t>();
  if (kind == 'f' && size == 4)
    return ACCRUE_DTYPE_FLOAT32;
  if (kind == 'f' && size == 8)
    return ACCRUE_DTYPE_FLOAT64;
  if (kind == 'f' && size == 2)
    return ACCRUE_DTYPE_FLOAT16;
  if (kind == 'i' && size == 8)
    return ACCRUE_DTYPE_INT64;
  if (kind == 'i' && size == 4)
    return ACCRUE_DTYPE_INT32;
  if (kind == 'b')
    return ACCRUE_DTYPE_BOOL;
  if (kind == 'u' && size == 1)
    return ACCRUE_DTYPE_UINT8;
  throw py::value_error("array '" + name + "' has dtype " +
                        std::string(py::str(type)) +
                        ", which Accrue does not read (float16/32/64, "
                        "int32/64, bool, uint8)");
}

/// A C dataset holding copies of `arrays`.
std::unique_ptr<AccrueDataset, void (*)(AccrueDataset *)>
makeDataset(const py::dict &arrays) {
  std::unique_ptr<AccrueDataset, void (*)(AccrueDataset *)> data(
      accrueDatasetCreate(), accrueDatasetDestroy);
  for (auto [key, value] : arrays) {
    std::string name = py::str(key);
    auto array = py::reinterpret_borrow<py::array>(value);
    if (!(array.flags() & py::array::c_style))
      throw py::value_error("array '" + name + "' is not C-contiguous");
    std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
    AccrueError *error = nullptr;
    if (accrueDatasetAddArray(data.get(), name.c_str(), dtypeOf(array, name),
                              shape.data(), static_cast<int>(shape.size()),
                              array.data(), &error))
      raise(error);
  }
  return data;
}

struct Artifact {
  std::shared_ptr<AccrueArtifact> handle;

  explicit Artifact(const std::string &directory) {
    AccrueError *error = nullptr;
    AccrueArtifact *artifact = accrueArtifactOpen(directory.c_str(), &error);
    if (!artifact)
      raise(error);
    handle.reset(artifact, accrueArtifactDestroy);
  }

  int64_t microBatch() const { return accrueArtifactMicroBatch(handle.get()); }
  std::optional<std::string> memoryPlan() const {
    const char *plan = accrueArtifactMemoryPlan(handle.get());
    return plan ? std::optional<std::string>(plan) : std::nullopt;
  }
  std::optional<std::string> kernelReport() const {
    const char *report = accrueArtifactKernelReport(handle.get());
    return report ? std::optional<std::string>(report) : std::nullopt;
  }

  /// (name, dtype, shape with -1 for the samples dimension) per input.
  std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>
  inputs() const {
    std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>
        result;
    for (int i = 0; i < accrueArtifactNumInputs(handle.get()); ++i) {
      const int64_t *shape = accrueArtifactInputShape(handle.get(), i);
      result.emplace_back(
          accrueArtifactInputName(handle.get(), i),
          accrueArtifactInputDType(handle.get(), i),
          std::vector<int64_t>(
              shape, shape + accrueArtifactInputRank(handle.get(), i)));
    }
    return result;
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> parameters() const {
    std::vector<std::pair<std::string, std::vector<int64_t>>> result;
    for (int i = 0; i < accrueArtifactNumParameters(handle.get()); ++i) {
      const int64_t *shape = accrueArtifactParameterShape(handle.get(), i);
      result.emplace_back(
          accrueArtifactParameterName(handle.get(), i),
          std::vector<int64_t>(
              shape, shape + accrueArtifactParameterRank(handle.get(), i)));
    }
    return result;
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> buffers() const {
    std::vector<std::pair<std::string, std::vector<int64_t>>> result;
    for (int i = 0; i < accrueArtifactNumBuffers(handle.get()); ++i) {
      const int64_t *shape = accrueArtifactBufferShape(handle.get(), i);
      result.emplace_back(
          accrueArtifactBufferName(handle.get(), i),
          std::vector<int64_t>(
              shape, shape + accrueArtifactBufferRank(handle.get(), i)));
    }
    return result;
  }
};

using SessionOptions =
    std::unique_ptr<AccrueSessionOptions, void (*)(AccrueSessionOptions *)>;

/// The C session options of `settings`, each checked as it is set.
SessionOptions makeOptions(const Settings &settings) {
  SessionOptions options(accrueSessionOptionsCreate(),
                         accrueSessionOptionsDestroy);
  AccrueError *error = nullptr;
  for (const auto &[name, value] : settings)
    if (accrueSessionOptionsSet(options.get(), name.c_str(), value.c_str(),
                                &error))
      raise(error);
  return options;
}

/// What a session will need, checked when the Python Session is made
/// (the C session is created with the first data): the settings together,
/// and the artifact's files (a deleted or truncated artifact).
void checkSession(const Artifact &artifact, const Settings &settings) {
  SessionOptions options = makeOptions(settings);
  AccrueError *error = nullptr;
  if (accrueSessionOptionsValidate(options.get(), &error) ||
      accrueArtifactCheckFiles(artifact.handle.get(), &error))
    raise(error);
}

struct Session {
  Artifact artifact;
  std::unique_ptr<AccrueSession, void (*)(AccrueSession *)> handle;

  Session(const Artifact &artifact, const py::dict &arrays,
          const Settings &settings)
      : artifact(artifact), handle(nullptr, accrueSessionDestroy) {
    auto data = makeDataset(arrays);
    SessionOptions options = makeOptions(settings);
    AccrueError *error = nullptr;
    AccrueSession *session = accrueSessionCreate(
        artifact.handle.get(), data.get(), options.get(), &error);
    if (!session)
      raise(error);
    handle.reset(session);
  }

  /// Runs one step; returns its metrics.jsonl line.
  std::string step() {
    AccrueError *error = nullptr;
    int status;
    {
      py::gil_scoped_release released;
      status = accrueSessionStep(handle.get(), nullptr, &error);
    }
    if (status)
      raise(error);
    return accrueSessionLastRecord(handle.get());
  }

  void setData(const py::dict &arrays) {
    auto data = makeDataset(arrays);
    AccrueError *error = nullptr;
    if (accrueSessionSetData(handle.get(), data.get(), &error))
      raise(error);
  }

  void planSteps(int64_t total) {
    AccrueError *error = nullptr;
    if (accrueSessionPlanSteps(handle.get(), total, &error))
      raise(error);
  }

  py::array_t<float> parameter(const std::string &name,
                               const std::vector<int64_t> &shape) {
    py::array_t<float> values(shape);
    AccrueError *error = nullptr;
    if (accrueSessionReadParameter(handle.get(), name.c_str(),
                                   values.mutable_data(), values.size(),
                                   &error))
      raise(error);
    return values;
  }

  template <typename F> void call(F &&function, const std::string &path) {
    AccrueError *error = nullptr;
    if (function(handle.get(), path.c_str(), &error))
      raise(error);
  }
};

Settings compileSettingList() {
  Settings result;
  for (int i = 0; i < accrueCompileOptionsNumSettings(); ++i)
    result.emplace_back(accrueCompileOptionsSettingName(i),
                        accrueCompileOptionsSettingIsFlag(i) ? "flag"
                                                             : "value");
  return result;
}

/// Compiles; returns the diagnostics (severity, message).
std::vector<std::pair<std::string, std::string>>
compile(const py::object &model, const std::string &output,
        const Settings &settings) {
  std::unique_ptr<AccrueCompileOptions, void (*)(AccrueCompileOptions *)>
      options(accrueCompileOptionsCreate(), accrueCompileOptionsDestroy);
  AccrueError *error = nullptr;
  for (const auto &[name, value] : settings)
    if (accrueCompileOptionsSet(options.get(), name.c_str(), value.c_str(),
                                &error))
      raise(error);
  std::vector<std::pair<std::string, std::string>> diagnostics;
  auto collect = [](const char *severity, const char *message, void *user) {
    static_cast<std::vector<std::pair<std::string, std::string>> *>(user)
        ->emplace_back(severity, message);
  };
  int status;
  if (py::isinstance<py::bytes>(model)) {
    std::string bytes = model.cast<std::string>();
    py::gil_scoped_release released;
    status = accrueCompileBytes(bytes.data(), bytes.size(), output.c_str(),
                                options.get(), collect, &diagnostics, &error);
  } else {
    std::string path = py::str(model);
    py::gil_scoped_release released;
    status = accrueCompile(path.c_str(), output.c_str(), options.get(), collect,
                           &diagnostics, &error);
  }
  if (status)
    raise(error);
  return diagnostics;
}

} // namespace

/// A torch.distributed process group's collectives, as Python functions of
/// numpy views of the step's buffers (accrue.Session(process_group=)).
struct HostGroup {
  py::function sum, extremum, broadcast, reduceScatter, allGather;
  int size;
};

/// Calls `fn` with the GIL held (the step runs without it); an exception
/// becomes the C API's failure with its message.
template <typename F> int callPython(F &&fn, char *error, size_t size) {
  py::gil_scoped_acquire gil;
  try {
    fn();
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(error, size, "%s", e.what());
    return 1;
  }
}

/// A numpy array over `count` elements at `data`, without a copy.
template <typename T> py::array_t<T> viewOf(T *data, int64_t count) {
  py::capsule owner(data, [](void *) {});
  return py::array_t<T>({static_cast<py::ssize_t>(count)}, {sizeof(T)}, data,
                        owner);
}

/// Calls a sharded optimizer state's collective `fn` of the group with
/// the whole buffer and the list of the shards' sizes.
int callSharded(py::function HostGroup::*fn, void *context, float *data,
                const int64_t *counts, char *error, size_t size) {
  auto *g = static_cast<HostGroup *>(context);
  return callPython(
      [&] {
        std::vector<int64_t> sizes(counts, counts + g->size);
        int64_t total = 0;
        for (int64_t n : sizes)
          total += n;
        (g->*fn)(viewOf(data, total), sizes);
      },
      error, size);
}

void setCollectives(int rank, int size, py::function sum, py::function extremum,
                    py::function broadcast, py::function reduceScatter,
                    py::function allGather) {
  // Kept for the process's life, as the collectives are.
  auto *group = new HostGroup{std::move(sum),       std::move(extremum),
                              std::move(broadcast), std::move(reduceScatter),
                              std::move(allGather), size};
  AccrueHostCollectives c{};
  c.context = group;
  c.rank = rank;
  c.size = size;
  c.all_reduce_sum = [](void *context, float *data, int64_t count, char *error,
                        size_t size) {
    auto *g = static_cast<HostGroup *>(context);
    return callPython([&] { g->sum(viewOf(data, count)); }, error, size);
  };
  c.all_reduce_extremum = [](void *context, int64_t *data, int64_t count,
                             int max, char *error, size_t size) {
    auto *g = static_cast<HostGroup *>(context);
    return callPython([&] { g->extremum(viewOf(data, count), max != 0); },
                      error, size);
  };
  c.broadcast = [](void *context, void *data, int64_t bytes, char *error,
                   size_t size) {
    auto *g = static_cast<HostGroup *>(context);
    return callPython(
        [&] { g->broadcast(viewOf(static_cast<uint8_t *>(data), bytes)); },
        error, size);
  };
  c.reduce_scatter_sum = [](void *context, float *data, const int64_t *counts,
                            char *error, size_t size) {
    return callSharded(&HostGroup::reduceScatter, context, data, counts, error,
                       size);
  };
  c.all_gather = [](void *context, float *data, const int64_t *counts,
                    char *error, size_t size) {
    return callSharded(&HostGroup::allGather, context, data, counts, error,
                       size);
  };
  AccrueError *error = nullptr;
  if (accrueSetCollectives(&c, &error))
    raise(error);
}

PYBIND11_MODULE(_accrue, m) {
  m.doc() = "Accrue's C API (use the accrue package)";
  static py::exception<std::runtime_error> errorType(m, "AccrueError",
                                                     PyExc_RuntimeError);
  accrueErrorType = errorType.ptr();

  m.def("compile_settings", &compileSettingList);
  m.def("session_settings", [] {
    std::vector<std::string> names;
    for (int i = 0; i < accrueSessionOptionsNumSettings(); ++i)
      names.emplace_back(accrueSessionOptionsSettingName(i));
    return names;
  });
  m.def("compile", &compile, py::arg("model"), py::arg("output"),
        py::arg("settings"));
  m.def("check_session", &checkSession, py::arg("artifact"),
        py::arg("settings"));
  m.def("set_collectives", &setCollectives, py::arg("rank"), py::arg("size"),
        py::arg("sum"), py::arg("extremum"), py::arg("broadcast"),
        py::arg("reduce_scatter"), py::arg("all_gather"));

  py::class_<Artifact>(m, "Artifact")
      .def(py::init<const std::string &>())
      .def_property_readonly("micro_batch", &Artifact::microBatch)
      .def_property_readonly("inputs", &Artifact::inputs)
      .def_property_readonly("parameters", &Artifact::parameters)
      .def_property_readonly("buffers", &Artifact::buffers)
      .def_property_readonly("memory_plan", &Artifact::memoryPlan)
      .def_property_readonly("kernel_report", &Artifact::kernelReport);

  py::class_<Session>(m, "Session")
      .def(py::init<const Artifact &, const py::dict &, const Settings &>())
      .def("step", &Session::step)
      .def("set_data", &Session::setData)
      .def("plan_steps", &Session::planSteps)
      .def_property_readonly("iterations",
                             [](const Session &s) {
                               return accrueSessionIterations(s.handle.get());
                             })
      .def_property_readonly("planned_steps",
                             [](const Session &s) {
                               return accrueSessionPlannedSteps(s.handle.get());
                             })
      .def_property_readonly("steps_left_in_pass",
                             [](const Session &s) {
                               return accrueSessionStepsLeftInPass(
                                   s.handle.get());
                             })
      .def("parameter", &Session::parameter)
      .def("export",
           [](Session &s, const std::string &path) {
             s.call(accrueSessionExportOnnx, path);
           })
      .def("save_gradients",
           [](Session &s, const std::string &path) {
             s.call(accrueSessionSaveGradients, path);
           })
      .def("save_kernel_profile",
           [](Session &s, const std::string &path) {
             s.call(accrueSessionSaveKernelProfile, path);
           })
      .def("save_checkpoint_to",
           [](Session &s, const std::string &path) {
             s.call(accrueSessionSaveCheckpointTo, path);
           })
      .def("save_checkpoint", [](Session &s) {
        AccrueError *error = nullptr;
        if (accrueSessionSaveCheckpoint(s.handle.get(), &error))
          raise(error);
      });
}
