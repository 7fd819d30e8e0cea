// `kiln serve`: every ONNX model in a folder behind an Open Inference Protocol v2 (KServe v2)
// HTTP server, through one engine.
//
//   GET  /v2/health/live, /v2/health/ready       liveness; ready once every model has loaded
//   GET  /v2                                     server metadata
//   GET  /v2/models/M[/versions/1]               model metadata (symbolic dims as -1)
//   GET  /v2/models/M[/versions/1]/ready         model readiness
//   POST /v2/models/M[/versions/1]/infer         inference: JSON tensors, or the binary tensor
//                                                data extension
//   GET  /metrics                                Prometheus metrics (metrics.h)
//
// Errors are {"error": "..."} with 400 (a bad request), 404 (an unknown model or route), 413
// (a body over the limit), 503 (a model that failed to load, or the server stopping) or 500.
// Threading: HTTP requests are handled on a pool of threads; each model's runner batches them
// (model_runner.h); Stop may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/cli/cli.h"
#include "api/serve/metrics.h"
#include "api/serve/model_runner.h"
#include "api/serve/oip.h"

namespace httplib {
class Server;
}

namespace kiln::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  BatchOptions batch;
  Limits limits;
  size_t max_request_bytes = size_t{64} << 20;
  int http_threads = 32;  // one per open connection: bounds the requests in flight
};

class Server {
 public:
  // Loads every MODEL_DIR/*.onnx (model name: the file name without .onnx) for `engine`, which
  // must outlive the server. A model that fails to load is reported on stderr and answers 503
  // (the server is then not ready). Throws cli::Failure when the folder cannot be read or holds
  // no .onnx file.
  Server(const std::string& model_dir, kiln_engine* engine, ServeOptions options);
  // Only once Serve has returned, or was never called.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0). Throws
  // cli::Failure when it cannot bind.
  int Bind();
  // Serves until Stop; the requests in flight finish first.
  void Serve();
  // Stops Serve (or keeps it from starting); returns at once.
  void Stop();
  // Stop, repeated until Serve has returned: for a stop that may come while Serve starts.
  void StopWhenServing();

 private:
  struct Served;
  void Route();
  Served* Find(const std::string& model, const std::string& version) const;

  kiln_engine* const engine_;
  const ServeOptions options_;
  std::map<std::string, std::unique_ptr<Served>> models_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stop_requested_{false}, serving_done_{false};
};

}  // namespace kiln::serve
