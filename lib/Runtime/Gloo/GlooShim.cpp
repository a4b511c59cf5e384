//===- GlooShim.cpp - Gloo's collectives behind a C face ------------------===//
//
// libaccrue-gloo.so: the data-parallel collectives of CPU runs launched
// without MPI (torchrun, srun), by Gloo over TCP. The ranks meet through a
// key-value store that rank 0 serves on MASTER_ADDR:MASTER_PORT (Debian's
// Gloo has file and Redis stores, not torch's TCP store): each rank
// publishes its transport's address there and reads the others'. The
// all-reduces, reduces, all-gathers and broadcasts are Gloo's own algorithms.
//
//===----------------------------------------------------------------------===//

#include "accrue-runtime/GlooShim.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void sendAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw std::runtime_error("the rendezvous store's connection closed");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void receiveAll(int fd, void *data, size_t size) {
  char *p = static_cast<char *>(data);
  while (size) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      throw std::runtime_error(
          "timed out waiting for the other ranks at the rendezvous (are all "
          "WORLD_SIZE ranks started, with the same MASTER_ADDR and "
          "MASTER_PORT?)");
    if (n <= 0)
      throw std::runtime_error("the rendezvous store's connection closed");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void sendString(int fd, const std::string &s) {
  uint64_t size = s.size();
  sendAll(fd, &size, sizeof size);
  sendAll(fd, s.data(), s.size());
}

std::string receiveString(int fd) {
  uint64_t size = 0;
  receiveAll(fd, &size, sizeof size);
  if (size > (uint64_t(1) << 30))
    throw std::runtime_error("the rendezvous store sent a malformed message");
  std::string s(size, '\0');
  receiveAll(fd, s.data(), size);
  return s;
}

/// The store's server, in rank 0: keys set once, read by any rank; a read
/// waits for its key. Requests: 'S' key value -> 'k'; 'G' key -> value;
/// 'R' rank: this connection is that rank's, kept open while it lives;
/// 'D' -> the ranks whose connections have closed ("1,3"; waits up to a
/// few seconds for one, since a peer may see a rank's death first);
/// 'W' -> the same, once there are any (a rank's watch). Its
/// threads share it (a read may wait for a rank that never comes), so it
/// lives until the last of them ends; stop() ends its accepting.
class StoreServer : public std::enable_shared_from_this<StoreServer> {
public:
  StoreServer(int port, const std::string &portName) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listener, reinterpret_cast<sockaddr *>(&address),
               sizeof address) != 0 ||
        ::listen(listener, 128) != 0) {
      std::string why = std::strerror(errno);
      ::close(listener);
      throw std::runtime_error("rank 0 cannot serve the rendezvous store on "
                               "port " +
                               std::to_string(port) + " (" + portName +
                               "): " + why);
    }
  }
  void start() {
    std::thread([self = shared_from_this()] { self->acceptLoop(); }).detach();
  }
  void stop() { ::shutdown(listener, SHUT_RDWR); }
  ~StoreServer() { ::close(listener); }

private:
  void acceptLoop() {
    for (;;) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
        continue;
      if (fd < 0)
        return;
      std::thread([self = shared_from_this(), fd] {
        self->serve(fd);
      }).detach();
    }
  }

  void serve(int fd) {
    std::string rank;
    try {
      for (;;) {
        char op = 0;
        receiveAll(fd, &op, 1);
        std::string key = receiveString(fd);
        if (op == 'R') {
          rank = key;
        } else if (op == 'W') {
          // A rank's watch: answered when some rank has gone.
          std::string gone;
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [&] { return !exited.empty(); });
            for (const std::string &r : exited)
              gone += (gone.empty() ? "" : ",") + r;
          }
          sendString(fd, gone);
        } else if (op == 'D') {
          std::string gone;
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait_for(lock, std::chrono::seconds(5),
                             [&] { return !exited.empty(); });
            for (const std::string &r : exited)
              gone += (gone.empty() ? "" : ",") + r;
          }
          sendString(fd, gone);
        } else if (op == 'S') {
          std::string value = receiveString(fd);
          bool fresh;
          {
            std::lock_guard<std::mutex> lock(mutex);
            fresh = values.emplace(key, std::move(value)).second;
          }
          changed.notify_all();
          // Each rank sets its own keys once: a second setter is another
          // process with the same rank.
          sendAll(fd, fresh ? "k" : "d", 1);
        } else if (op == 'G') {
          std::string value;
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [&] { return values.count(key) != 0; });
            value = values[key];
          }
          sendString(fd, value);
        } else {
          break;
        }
      }
    } catch (const std::exception &) {
    }
    ::close(fd);
    if (!rank.empty()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        exited.push_back(rank);
      }
      changed.notify_all();
    }
  }

  int listener = -1;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
  /// The ranks whose connections have closed, in order.
  std::vector<std::string> exited;
};

/// A rank's side of the store (Gloo's rendezvous interface).
class TcpStore : public gloo::rendezvous::Store {
public:
  TcpStore(const std::string &host, int port,
           std::chrono::milliseconds timeout) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(),
                                   &hints, &found))
      throw std::runtime_error("cannot resolve MASTER_ADDR '" + host +
                               "': " + ::gai_strerror(status));
    // Rank 0 may not serve yet: retry until the timeout.
    auto deadline = Clock::now() + timeout;
    for (;;) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0)
        break;
      ::close(fd);
      fd = -1;
      if (Clock::now() > deadline) {
        ::freeaddrinfo(found);
        throw std::runtime_error(
            "no rendezvous store at " + host + ":" + std::to_string(port) +
            " (MASTER_ADDR:MASTER_PORT) within " +
            std::to_string(timeout.count() / 1000) + " s: is rank 0 running?");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(found);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A rank that never arrives ends the wait for its key.
    timeval limit{};
    limit.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    limit.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  ~TcpStore() override {
    if (fd >= 0)
      ::close(fd);
  }

  void set(const std::string &key, const std::vector<char> &data) override {
    std::lock_guard<std::mutex> lock(mutex);
    sendAll(fd, "S", 1);
    sendString(fd, key);
    sendString(fd, std::string(data.begin(), data.end()));
    char ack = 0;
    receiveAll(fd, &ack, 1);
    if (ack != 'k')
      throw std::runtime_error("another process has set '" + key +
                               "' at the rendezvous: two processes were "
                               "given the same rank");
  }
  std::vector<char> get(const std::string &key) override {
    std::lock_guard<std::mutex> lock(mutex);
    sendAll(fd, "G", 1);
    sendString(fd, key);
    std::string value = receiveString(fd);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &key : keys)
      get(key);
  }
  /// Marks this connection as rank `rank`'s: the store sees it close when
  /// the rank's process ends.
  void registerRank(int rank) {
    std::lock_guard<std::mutex> lock(mutex);
    sendAll(fd, "R", 1);
    sendString(fd, std::to_string(rank));
  }
  /// Which ranks have exited, for a message: "rank 3", "ranks 1, 3", or
  /// "rank 0" when the store (rank 0 serves it) is gone too; empty when
  /// none is known to have. With `wait`, only once some rank has (a
  /// watch's connection, which has no receive timeout).
  std::string exitedRanks(bool wait = false) {
    try {
      std::lock_guard<std::mutex> lock(mutex);
      sendAll(fd, wait ? "W" : "D", 1);
      sendString(fd, "");
      std::string gone = receiveString(fd);
      if (gone.empty())
        return "";
      bool several = gone.find(',') != std::string::npos;
      std::string text = several ? "ranks " : "rank ";
      for (char c : gone)
        text += c == ',' ? std::string(", ") : std::string(1, c);
      return text;
    } catch (const std::exception &) {
      return "rank 0";
    }
  }
  /// Receives without a time limit from now on.
  void waitForever() {
    timeval none{};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  }
  /// The address this rank's connection to the store leaves from.
  std::string localAddress() const {
    sockaddr_in address{};
    socklen_t size = sizeof address;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &size) != 0 ||
        !::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text))
      throw std::runtime_error("cannot read this rank's address");
    return text;
  }

private:
  int fd = -1;
  std::mutex mutex;
};

void report(const std::string &message, char *error, size_t size) {
  if (error && size) {
    std::strncpy(error, message.c_str(), size - 1);
    error[size - 1] = '\0';
  }
}

/// What a rank's watch thread knows: which ranks have gone, and whether
/// this rank is inside a collective. Gloo ends a collective whose peer
/// closes its connection, except one waiting to send to it (this Gloo's
/// unbound buffers are not told of the pair's error): the watch ends such a
/// wait, which would otherwise last the collective timeout.
struct Watch {
  int rank = 0;
  std::atomic<int> inFlight{0};
  std::mutex mutex;
  std::string gone;

  std::string goneRanks() {
    std::lock_guard<std::mutex> lock(mutex);
    return gone;
  }
  /// Waits (on its own connection to the store) for a rank to go; then
  /// gives a collective in flight 2 s to fail by itself before ending this
  /// process with the error line.
  static void start(std::shared_ptr<Watch> watch,
                    std::unique_ptr<TcpStore> store) {
    store->waitForever();
    std::thread([watch, store = std::move(store)] {
      std::string gone = store->exitedRanks(/*wait=*/true);
      {
        std::lock_guard<std::mutex> lock(watch->mutex);
        watch->gone = gone;
      }
      for (int i = 0; i < 20 && watch->inFlight; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!watch->inFlight)
        return;
      std::fprintf(stderr,
                   "accrue: rank %d: a Gloo collective failed: %s exited "
                   "while this rank waited to send to it\n",
                   watch->rank, gone.c_str());
      std::fflush(nullptr);
      std::_Exit(1);
    }).detach();
  }
};

/// Marks a collective in flight for the watch; refuses to start one after
/// a rank has gone (it could wait for it forever).
class InFlight {
public:
  explicit InFlight(Watch &watch) : watch(watch) {
    if (!watch.goneRanks().empty())
      throw std::runtime_error("a rank is gone");
    ++watch.inFlight;
  }
  ~InFlight() { --watch.inFlight; }

private:
  Watch &watch;
};

} // namespace

struct AccrueGloo {
  ~AccrueGloo() {
    if (server)
      server->stop();
  }
  std::shared_ptr<StoreServer> server;
  /// The rank's connection to the store, kept open: it tells the store
  /// when this rank is gone, and the other ranks ask it who is.
  std::unique_ptr<TcpStore> store;
  std::shared_ptr<Watch> watch = std::make_shared<Watch>();
  std::shared_ptr<gloo::Context> context;
  uint32_t tag = 0;
};

extern "C" int accrue_gloo_connect(int rank, int size, const char *storeHost,
                                   int storePort, const char *selfHost,
                                   int rendezvousSeconds, int collectiveSeconds,
                                   AccrueGloo **group, char *error,
                                   size_t errorSize) {
  try {
    // A write to a rank that has died must fail (Gloo throws, and the
    // error names the rank), not end this process silently with SIGPIPE.
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 &&
        current.sa_handler == SIG_DFL)
      ::signal(SIGPIPE, SIG_IGN);
    auto made = std::make_unique<AccrueGloo>();
    std::chrono::milliseconds rendezvous(int64_t(rendezvousSeconds) * 1000);
    if (rank == 0) {
      made->server = std::make_shared<StoreServer>(
          storePort, "MASTER_PORT, or the next one under torchrun, or "
                     "ACCRUE_STORE_PORT");
      made->server->start();
    }
    made->store = std::make_unique<TcpStore>(storeHost, storePort, rendezvous);
    TcpStore &store = *made->store;
    gloo::transport::tcp::attr attr;
    attr.hostname = *selfHost ? std::string(selfHost) : store.localAddress();
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(rendezvous);
    context->connectFullMesh(store, device);
    context->setTimeout(
        std::chrono::milliseconds(int64_t(collectiveSeconds) * 1000));
    store.registerRank(rank);
    made->watch->rank = rank;
    Watch::start(made->watch,
                 std::make_unique<TcpStore>(storeHost, storePort, rendezvous));
    made->context = context;
    *group = made.release();
    return 0;
  } catch (const std::exception &e) {
    report(std::string("rank ") + std::to_string(rank) + " of " +
               std::to_string(size) + ": Gloo: " + e.what(),
           error, errorSize);
    return 1;
  }
}

/// Reports a collective's failure (1), naming the ranks that have exited
/// when the store knows of any.
static int collectiveFailed(const AccrueGloo &group, const char *what,
                            const std::exception &e, char *error,
                            size_t errorSize) {
  std::string gone = group.watch->goneRanks();
  if (gone.empty())
    gone = group.store->exitedRanks();
  report(std::string("rank ") + std::to_string(group.context->rank) +
             ": Gloo " + what + " failed: " +
             (gone.empty() ? std::string("") : gone + " exited (") + e.what() +
             (gone.empty() ? " (did another rank exit, or stall past "
                             "ACCRUE_COLLECTIVE_TIMEOUT?)"
                           : ")"),
         error, errorSize);
  return 1;
}

extern "C" int accrue_gloo_all_reduce(AccrueGloo *group, void *data,
                                      int64_t count, int reduction, char *error,
                                      size_t errorSize) {
  try {
    InFlight inFlight(*group->watch);
    gloo::AllreduceOptions options(group->context);
    options.setTag(group->tag++);
    using Reduce = void (*)(void *, const void *, const void *, size_t);
    if (reduction == ACCRUE_GLOO_SUM_F32) {
      options.setOutput(static_cast<float *>(data), count);
      options.setReduceFunction(static_cast<Reduce>(&gloo::sum<float>));
    } else {
      options.setOutput(static_cast<int64_t *>(data), count);
      options.setReduceFunction(reduction == ACCRUE_GLOO_MIN_I64
                                    ? static_cast<Reduce>(&gloo::min<int64_t>)
                                    : static_cast<Reduce>(&gloo::max<int64_t>));
    }
    gloo::allreduce(options);
    return 0;
  } catch (const std::exception &e) {
    return collectiveFailed(*group, "all-reduce", e, error, errorSize);
  }
}

extern "C" int accrue_gloo_broadcast(AccrueGloo *group, void *data,
                                     int64_t bytes, char *error,
                                     size_t errorSize) {
  try {
    InFlight inFlight(*group->watch);
    gloo::BroadcastOptions options(group->context);
    options.setTag(group->tag++);
    options.setRoot(0);
    options.setOutput(static_cast<char *>(data), bytes);
    gloo::broadcast(options);
    return 0;
  } catch (const std::exception &e) {
    return collectiveFailed(*group, "broadcast", e, error, errorSize);
  }
}

extern "C" int accrue_gloo_reduce_scatter(AccrueGloo *group, float *data,
                                          const int64_t *counts, char *error,
                                          size_t errorSize) {
  try {
    InFlight inFlight(*group->watch);
    // One Gloo reduce per shard, to the rank that owns it: each rank sends
    // what a reduce-scatter sends, and the reduces work in place with
    // segment-sized scratch. (Gloo's halving-doubling reduce-scatter keeps
    // two buffers of the whole arena per call, which would cost a sharded
    // rank more memory than the optimizer state it saves.)
    using Reduce = void (*)(void *, const void *, const void *, size_t);
    int64_t begin = 0;
    for (int r = 0; r < group->context->size; begin += counts[r++]) {
      if (!counts[r])
        continue;
      gloo::ReduceOptions options(group->context);
      options.setTag(group->tag++);
      options.setRoot(r);
      options.setOutput(data + begin, static_cast<size_t>(counts[r]));
      options.setReduceFunction(static_cast<Reduce>(&gloo::sum<float>));
      gloo::reduce(options);
    }
    return 0;
  } catch (const std::exception &e) {
    return collectiveFailed(*group, "reduce-scatter", e, error, errorSize);
  }
}

extern "C" int accrue_gloo_all_gather(AccrueGloo *group, float *data,
                                      const int64_t *counts, char *error,
                                      size_t errorSize) {
  try {
    InFlight inFlight(*group->watch);
    std::vector<size_t> shards;
    size_t begin = 0;
    for (int r = 0; r < group->context->size; ++r) {
      if (r < group->context->rank)
        begin += counts[r];
      shards.push_back(static_cast<size_t>(counts[r]));
    }
    // The input is a copy of this rank's shard: the output overwrites it.
    std::vector<float> mine(data + begin,
                            data + begin + counts[group->context->rank]);
    gloo::AllgathervOptions options(group->context);
    options.setTag(group->tag++);
    options.setInput(mine.data(), mine.size());
    options.setOutput(data, shards);
    gloo::allgatherv(options);
    return 0;
  } catch (const std::exception &e) {
    return collectiveFailed(*group, "all-gather", e, error, errorSize);
  }
}

extern "C" void accrue_gloo_close(AccrueGloo *group) { delete group; }

// The types of StepABI-style entries the runtime looks up.
static_assert(
    std::is_same_v<decltype(&accrue_gloo_connect), AccrueGlooConnectFn> &&
        std::is_same_v<decltype(&accrue_gloo_all_reduce),
                       AccrueGlooAllReduceFn> &&
        std::is_same_v<decltype(&accrue_gloo_broadcast),
                       AccrueGlooBroadcastFn> &&
        std::is_same_v<decltype(&accrue_gloo_reduce_scatter),
                       AccrueGlooReduceScatterFn> &&
        std::is_same_v<decltype(&accrue_gloo_all_gather),
                       AccrueGlooAllGatherFn> &&
        std::is_same_v<decltype(&accrue_gloo_close), AccrueGlooCloseFn>,
    "GlooShim.h's function types");
