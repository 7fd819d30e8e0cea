// `kiln serve`'s HTTP side (server.h), over cpp-httplib.
#include "api/serve/server.h"

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <utility>

namespace kiln::serve {

// A model of the folder: loaded and served by its runner, or the reason it failed to load.
struct Server::Served {
  std::string name;
  cli::ModelPtr model;
  std::unique_ptr<ModelRunner> runner;  // null when the model failed to load
  std::string error;
};

namespace {

void Reply(httplib::Response& res, int status, const std::string& json) {
  res.status = status;
  res.set_content(json, "application/json");
}

void ReplyError(httplib::Response& res, const HttpError& e) {
  Reply(res, e.status, ErrorJson(e.message));
}

// Inference-Header-Content-Length, when present: a decimal byte count.
std::optional<size_t> HeaderLength(const httplib::Request& req) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || v[0] == '-')
    throw HttpError{400, "Inference-Header-Content-Length '" + v + "' is not a byte count"};
  return static_cast<size_t>(n);
}

// Why `model` cannot be served ("" when it can): the Open Inference Protocol's outputs are
// tensors, so a model that returns a sequence is refused at load, naming the output.
std::string SequenceOutput(const kiln_model* model) {
  size_t n = 0;
  kiln_model_num_outputs(model, &n);
  for (size_t i = 0; i < n; ++i) {
    int sequence = 0;
    const char* name = "";
    kiln_model_output_is_sequence(model, i, &sequence);
    kiln_model_output_name(model, i, &name);
    if (sequence)
      return std::string("output '") + name +
             "' is a sequence; the Open Inference Protocol returns tensors only";
  }
  return "";
}

// The model path patterns: /v2/models/NAME or /v2/models/NAME/versions/VERSION, then `tail`.
std::string ModelRoute(const char* tail) {
  return std::string(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)") + tail;
}

}  // namespace

Server::Server(const std::string& model_dir, kiln_engine* engine, ServeOptions options)
    : engine_(engine), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(model_dir, ec), end; !ec && it != end;
       it.increment(ec))
    if (it->path().extension() == ".onnx") files.push_back(it->path());
  if (ec)
    throw cli::Failure{"serve: cannot read the model folder '" + model_dir + "': " + ec.message()};
  if (files.empty())
    throw cli::Failure{"serve: the model folder '" + model_dir + "' has no .onnx file"};
  std::sort(files.begin(), files.end());

  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.stem().string());
  metrics_ = std::make_unique<Metrics>(names);
  for (const auto& f : files) {
    auto s = std::make_unique<Served>();
    s->name = f.stem().string();
    kiln_model* m = nullptr;
    if (kiln_model_load_onnx_file(f.c_str(), &m) != KILN_OK) {
      s->error = kiln_last_error();
    } else if (std::string why = SequenceOutput(m); !why.empty()) {
      kiln_model_destroy(m);
      s->error = why;
    }
    if (!s->error.empty()) {
      std::fprintf(stderr, "kiln serve: model '%s' failed to load: %s\n", s->name.c_str(),
                   s->error.c_str());
    } else {
      s->model.reset(m);
      Metrics* metrics = metrics_.get();
      const std::string name = s->name;
      s->runner = std::make_unique<ModelRunner>(s->name, engine_, m, options_.batch,
                                                [metrics, name](int64_t requests, int64_t rows) {
                                                  metrics->Batch(name, requests, rows);
                                                });
      if (!s->runner->batch_symbol().empty())
        std::fprintf(stderr, "kiln serve: model '%s': requests batched along '%s'\n",
                     s->name.c_str(), s->runner->batch_symbol().c_str());
      else
        std::fprintf(stderr, "kiln serve: model '%s': not batched (%s)\n", s->name.c_str(),
                     s->runner->unbatched_why().c_str());
    }
    models_[s->name] = std::move(s);
  }

  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_->set_payload_max_length(options_.max_request_bytes);
  Route();
}

Server::~Server() {
  // Serve has returned (the precondition): the HTTP threads are gone, so the runners may stop
  // now (their batch threads join) and the models go.
  Stop();
  models_.clear();
}

int Server::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw cli::Failure{"serve: cannot bind to " + options_.host + " on any port"};
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw cli::Failure{"serve: cannot bind to " + options_.host + ":" + std::to_string(port) +
                       " (in use, or not an address of this machine)"};
  }
  return port;
}

void Server::Serve() {
  if (!stop_requested_.load()) http_->listen_after_bind();
  serving_done_.store(true);
}

void Server::Stop() {
  stop_requested_.store(true);
  http_->stop();
}

void Server::StopWhenServing() {
  // httplib's stop does nothing before listen_after_bind has started: a stop that comes just
  // then (a signal while starting) is repeated until Serve returns.
  Stop();
  while (!serving_done_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (http_->is_running()) http_->stop();
  }
}

Server::Served* Server::Find(const std::string& model, const std::string& version) const {
  auto it = models_.find(model);
  if (it == models_.end()) {
    std::string known;
    for (const auto& [name, s] : models_) known += (known.empty() ? "" : ", ") + name;
    throw HttpError{404, "model '" + model + "' is not served here (the models: " + known + ")"};
  }
  if (!version.empty() && version != "1")
    throw HttpError{404, "model '" + model + "' has no version '" + version + "' (it has 1)"};
  return it->second.get();
}

void Server::Route() {
  httplib::Server& h = *http_;
  // Every handler answers errors as JSON; an exception that escapes is a 500, never a crash.
  h.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const HttpError& e) {
          ReplyError(res, e);
        } catch (const std::bad_alloc&) {
          ReplyError(res, HttpError{503, "out of memory"});
        } catch (const std::exception& e) {
          ReplyError(res, HttpError{500, e.what()});
        } catch (...) {
          ReplyError(res, HttpError{500, "an unknown exception"});
        }
      });
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 404   ? "no route for " + req.method + " " + req.path
                       : res.status == 413 ? "the request body is over the limit"
                                           : "HTTP error " + std::to_string(res.status);
    res.set_content(ErrorJson(what), "application/json");
  });

  h.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, R"({"live":true})");
  });
  h.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    bool ready = true;
    for (const auto& [name, s] : models_) ready = ready && s->runner;
    Reply(res, ready ? 200 : 503, ready ? R"({"ready":true})" : R"({"ready":false})");
  });
  h.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200,
          nlohmann::json{{"name", "kiln"},
                         {"version", kiln_version_string()},
                         {"extensions", {"binary_tensor_data"}}}
              .dump());
  });
  h.Get(ModelRoute(""), [this](const httplib::Request& req, httplib::Response& res) {
    Served* s = Find(req.matches[1], req.matches[2]);
    if (!s->runner) throw HttpError{503, "model '" + s->name + "' failed to load: " + s->error};
    Reply(res, 200, ModelMetadataJson(s->name, s->runner->inputs(), s->runner->outputs()));
  });
  h.Get(ModelRoute("/ready"), [this](const httplib::Request& req, httplib::Response& res) {
    Served* s = Find(req.matches[1], req.matches[2]);
    nlohmann::json j = {{"name", s->name}, {"ready", s->runner != nullptr}};
    Reply(res, s->runner ? 200 : 503,
          j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
  // The body is read here, not by httplib: httplib would parse a body sent as a form (curl -d's
  // default content type) and refuse one over 8 KiB.
  h.Post(ModelRoute("/infer"), [this](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& read) {
    // The body is read first, whatever the answer: an unread body would be taken for the next
    // request on the connection. httplib refuses a body over set_payload_max_length before
    // calling back (the read returns false); a chunked one over it is read to its end here
    // and dropped.
    std::string body;
    bool too_big = false;
    const bool whole = read([&](const char* data, size_t n) {
      too_big = too_big || n > options_.max_request_bytes - body.size();
      if (!too_big) body.append(data, n);
      return true;
    });
    if (!whole || too_big) {
      res.set_header("Connection", "close");
      throw HttpError{413, "the request body is over the limit of " +
                               std::to_string(options_.max_request_bytes) + " bytes"};
    }
    const std::string model = req.matches[1];
    Served* s = Find(model, req.matches[2]);
    const auto start = std::chrono::steady_clock::now();
    bool ok = false;
    try {
      if (!s->runner) throw HttpError{503, "model '" + s->name + "' failed to load: " + s->error};
      InferRequest r = ParseInferRequest(body, HeaderLength(req), options_.limits);
      std::vector<std::string> names;
      for (const RequestedOutput& o : r.outputs) names.push_back(o.name);
      std::vector<OutputView> outs = s->runner->Infer(std::move(r.inputs), names);
      std::vector<bool> binary;
      for (size_t i = 0; i < outs.size(); ++i)
        binary.push_back(r.outputs.empty() ? r.binary_outputs : r.outputs[i].binary);
      Response out = EncodeInferResponse(s->name, r.id, outs, binary);
      res.status = 200;
      if (out.header_length) {
        res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
        res.set_content(std::move(out.body), "application/octet-stream");
      } else {
        res.set_content(std::move(out.body), "application/json");
      }
      ok = true;
    } catch (const HttpError& e) {
      ReplyError(res, e);
    } catch (const std::bad_alloc&) {
      ReplyError(res, HttpError{503, "model '" + s->name + "': out of memory"});
    } catch (const std::exception& e) {
      ReplyError(res, HttpError{500, "model '" + s->name + "': " + e.what()});
    }
    metrics_->Request(
        s->name, ok,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    char* json = nullptr;
    std::string stats = "{}";
    if (kiln_engine_stats_json(engine_, &json) == KILN_OK) stats = json;
    kiln_string_free(json);
    res.status = 200;
    res.set_content(metrics_->Text(stats), "text/plain; version=0.0.4");
  });
}

}  // namespace kiln::serve
