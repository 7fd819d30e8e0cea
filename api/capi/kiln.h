/* kiln.h: the stable C API of kiln, a JIT-compiling inference engine (SPEC.md §7).
 *
 * The one public header: valid C99 and C++, nothing C++ in it. Include it as "kiln.h" and link
 * libkiln.so: installed, `pkg-config --cflags --libs kiln` or CMake's find_package(kiln) and
 * kiln::kiln; inside this tree, the kiln_api (static) or kiln_shared target.
 *
 *   kiln_engine* engine = NULL;
 *   kiln_model* model = NULL;
 *   kiln_tensor* out = NULL;
 *   if (kiln_engine_create(NULL, &engine) != KILN_OK ||
 *       kiln_model_load_onnx_file("mlp.onnx", &model) != KILN_OK ||
 *       kiln_engine_run(engine, model, 1, names, inputs, 1, NULL, &out) != KILN_OK)
 *     fprintf(stderr, "kiln: %s\n", kiln_last_error());
 *   ...
 *   kiln_tensor_destroy(out);
 *   kiln_model_destroy(model);
 *   kiln_engine_destroy(engine);
 *
 * Conventions, for every function below:
 *   - A fallible call returns a kiln_status; KILN_OK is 0, so `if (status)` tests for failure.
 *     On failure kiln_last_error() holds a message naming what failed (the input, node, pass,
 *     option or file), and no output parameter has been written.
 *   - Handles are opaque. Each `*_create`/`*_load_*`/`*_build` has a `*_destroy`, which accepts
 *     NULL and never fails. A NULL handle or output pointer where one is required is
 *     KILN_INVALID_ARGUMENT, never a crash.
 *   - Strings passed in are read during the call only (copied where kept). Strings returned as
 *     `const char*` live as long as the handle they came from; strings returned as `char*` are
 *     the caller's, freed with kiln_string_free.
 *   - No C++ exception ever leaves a kiln function.
 *
 * ABI growth: this header only grows. Functions, enumerators (status codes, dtypes) and
 * handle types are appended, never changed or removed, and enumerator values never change.
 * Options are opaque handles with setters (no structs cross the boundary), so new options are
 * new setter functions.
 *
 * Threading, per handle type (also stated at each type):
 *   kiln_engine        thread-safe: any number of threads may run models through one engine.
 *   kiln_model         immutable once made: thread-safe, shared by any number of runs.
 *   kiln_tensor        not synchronized: any number of threads may read one (e.g. as a run's
 *                      input) at once; writing it (as a run's output, copy_from_host) needs
 *                      exclusive use.
 *   kiln_options, kiln_attrs, kiln_graph_builder
 *                      not synchronized: one thread at a time.
 *   kiln_last_error    per thread.
 */
#ifndef KILN_H_
#define KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* ---------------------------------------------------------------------------------------- */
/* Status, errors, version                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* Append-only; the values mirror kiln::ErrorCode (ir/error.h) one to one. */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1, /* a bad argument: NULL handle, unknown input, wrong shape */
  KILN_NOT_FOUND = 2,        /* a name that does not exist: op, pass, config key, file */
  KILN_UNSUPPORTED = 3,      /* valid, but kiln cannot do it (yet): an ONNX op, a target */
  KILN_TYPE_ERROR = 4,       /* the graph does not type-check; the node is named */
  KILN_COMPILE_ERROR = 5,    /* a pass or the code generator failed; the pass is named */
  KILN_OUT_OF_MEMORY = 6,
  KILN_CANCELLED = 7,
  KILN_INTERNAL = 8, /* a kiln bug */
  KILN_PARSE_ERROR = 9
} kiln_status;

/* The message of the last call that failed on this thread ("" if none has). Calls that succeed
 * leave it as it was. Valid until the next failing call on this thread. */
const char* kiln_last_error(void);
/* "KILN_OK", "KILN_INVALID_ARGUMENT", ...; "KILN_UNKNOWN_STATUS" for other values. */
const char* kiln_status_name(kiln_status status);

/* The library's version (may differ from the KILN_VERSION_* this header was compiled with).
 * Any pointer may be NULL. */
void kiln_version(int* major, int* minor, int* patch);
const char* kiln_version_string(void); /* "0.1.0" */

/* Frees a string kiln returned as `char*`; NULL is allowed. */
void kiln_string_free(char* s);

/* ---------------------------------------------------------------------------------------- */
/* Data types                                                                                */
/* ---------------------------------------------------------------------------------------- */

/* Append-only. Values are stored in row-major order, in the host's byte order. KILN_F16 is
 * IEEE binary16, KILN_BF16 the top half of an f32, KILN_BOOL one byte (0 or 1). */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_BF16 = 2,
  KILN_F64 = 3,
  KILN_I8 = 4,
  KILN_I16 = 5,
  KILN_I32 = 6,
  KILN_I64 = 7,
  KILN_U8 = 8,
  KILN_BOOL = 9,
  KILN_U16 = 10,
  KILN_U32 = 11,
  KILN_U64 = 12
} kiln_dtype;

/* "f32", "i64", ...; NULL for a value that is not a kiln_dtype. */
const char* kiln_dtype_name(kiln_dtype dtype);
/* Bytes per element; 0 for a value that is not a kiln_dtype. */
size_t kiln_dtype_size(kiln_dtype dtype);

/* ---------------------------------------------------------------------------------------- */
/* Tensors: dense, row-major, host memory                                                    */
/* ---------------------------------------------------------------------------------------- */

/* Threading: not synchronized; many threads may read one at once, a writer needs it alone. */
typedef struct kiln_tensor kiln_tensor;

/* A zero-filled tensor whose memory kiln owns (64-byte aligned). `shape` may be NULL when
 * rank is 0 (a scalar). A negative dim or a size that overflows is KILN_INVALID_ARGUMENT. */
kiln_status kiln_tensor_create(kiln_dtype dtype, size_t rank, const int64_t* shape,
                               kiln_tensor** out);
/* A tensor over the caller's buffer, without copying: `nbytes` must be exactly the tensor's
 * size, and `data` aligned to the element size. The caller keeps ownership: the buffer must
 * outlive the tensor and every run that uses it, and kiln never frees it. Runs read (inputs)
 * or write (outputs) the buffer directly. */
kiln_status kiln_tensor_wrap(kiln_dtype dtype, size_t rank, const int64_t* shape, void* data,
                             size_t nbytes, kiln_tensor** out);
/* A serialized ONNX TensorProto (an ONNX test case's input_0.pb), copied into a new tensor.
 * Errors name the file. */
kiln_status kiln_tensor_read_onnx_pb(const char* path, kiln_tensor** out);
void kiln_tensor_destroy(kiln_tensor* tensor);

kiln_status kiln_tensor_dtype(const kiln_tensor* tensor, kiln_dtype* out);
kiln_status kiln_tensor_rank(const kiln_tensor* tensor, size_t* out);
/* Writes the rank dims to `dims`, which holds `capacity` entries; too small is an error. */
kiln_status kiln_tensor_shape(const kiln_tensor* tensor, size_t capacity, int64_t* dims);
kiln_status kiln_tensor_num_elements(const kiln_tensor* tensor, int64_t* out);
kiln_status kiln_tensor_nbytes(const kiln_tensor* tensor, size_t* out);
/* The data pointer (the caller's buffer for a wrapped tensor); valid while the tensor lives.
 * NULL for a tensor with no elements. */
kiln_status kiln_tensor_data(const kiln_tensor* tensor, void** out);
/* Copies exactly the tensor's size in bytes; a different `nbytes` is an error. */
kiln_status kiln_tensor_copy_from_host(kiln_tensor* tensor, const void* src, size_t nbytes);
kiln_status kiln_tensor_copy_to_host(const kiln_tensor* tensor, void* dst, size_t nbytes);

/* ---------------------------------------------------------------------------------------- */
/* Models                                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* A graph with symbolic input shapes (`x: f32[batch, 784]`) and its weights.
 * Threading: immutable once made; thread-safe. A model may be destroyed while an engine still
 * holds executables compiled from it (they keep what they need). */
typedef struct kiln_model kiln_model;

/* ONNX models, through kiln's importer. Unsupported ops are KILN_UNSUPPORTED naming the op and
 * the node; a malformed file KILN_INVALID_ARGUMENT naming the file. */
kiln_status kiln_model_load_onnx_file(const char* path, kiln_model** out);
/* A model in memory; it cannot use external data (tensors stored in other files). */
kiln_status kiln_model_load_onnx_buffer(const void* data, size_t size, kiln_model** out);

/* Limits and paths for loading ONNX models, for a server that loads models it did not make.
 * Threading: one thread at a time; a load copies what it needs. */
typedef struct kiln_load_options kiln_load_options;
kiln_status kiln_load_options_create(kiln_load_options** out);
void kiln_load_options_destroy(kiln_load_options* options);
/* The largest model file or buffer accepted, checked before anything is read (a file with
 * stat); 1 to 2^31 - 1 (protobuf's limit, the default). Over it a load is
 * KILN_INVALID_ARGUMENT naming max_model_bytes. */
kiln_status kiln_load_options_set_max_model_bytes(kiln_load_options* options, uint64_t max_bytes);
/* The most bytes of weights (initializers and Constant values, inline or external) a model may
 * have, checked before each is allocated; 0 (the default): half the machine's memory. Over it
 * a load is KILN_INVALID_ARGUMENT naming max_weight_bytes. */
kiln_status kiln_load_options_set_max_weight_bytes(kiln_load_options* options, uint64_t max_bytes);
/* The folder that external-data locations resolve against; NULL or "" (the default): the model
 * file's folder, and none for a buffer (which then cannot use external data). */
kiln_status kiln_load_options_set_base_dir(kiln_load_options* options, const char* dir);
/* kiln_model_load_onnx_file and _buffer with `options` (NULL: the defaults). */
kiln_status kiln_model_load_onnx_file_with(const char* path, const kiln_load_options* options,
                                           kiln_model** out);
kiln_status kiln_model_load_onnx_buffer_with(const void* data, size_t size,
                                             const kiln_load_options* options, kiln_model** out);
void kiln_model_destroy(kiln_model* model);

/* The model's name; lives as long as the model. */
kiln_status kiln_model_name(const kiln_model* model, const char** out);
kiln_status kiln_model_num_inputs(const kiln_model* model, size_t* out);
kiln_status kiln_model_num_outputs(const kiln_model* model, size_t* out);
/* Names live as long as the model. An index out of range is KILN_INVALID_ARGUMENT. */
kiln_status kiln_model_input_name(const kiln_model* model, size_t index, const char** out);
kiln_status kiln_model_output_name(const kiln_model* model, size_t index, const char** out);
/* The element type and rank of an input or output; either pointer may be NULL. */
kiln_status kiln_model_input_type(const kiln_model* model, size_t index, kiln_dtype* dtype,
                                  size_t* rank);
kiln_status kiln_model_output_type(const kiln_model* model, size_t index, kiln_dtype* dtype,
                                   size_t* rank);
/* Dim `dim` of an input or output: a constant sets *value and sets *symbol to NULL; a symbolic
 * dim sets *value to -1 and *symbol to its text (`batch`, or an expression like `batch * 2`),
 * which lives as long as the model. Either pointer may be NULL. */
kiln_status kiln_model_input_dim(const kiln_model* model, size_t index, size_t dim, int64_t* value,
                                 const char** symbol);
kiln_status kiln_model_output_dim(const kiln_model* model, size_t index, size_t dim, int64_t* value,
                                  const char** symbol);
/* The model's graph as kiln text IR (ir/text.h); large weights print as `meta[i]`. */
kiln_status kiln_model_print(const kiln_model* model, char** out_text);

/* ---------------------------------------------------------------------------------------- */
/* Sequences of tensors (ONNX SequenceConstruct, SplitToSequence, SequenceMap, ...)           */
/* ---------------------------------------------------------------------------------------- */

/* kiln resolves every sequence when it specializes a model, so a sequence *input*'s length and
 * its elements' ranks are part of the model, as a tensor input's rank is: they are given when
 * the model is loaded, and each element becomes an input of its own, named `<input>.<i>`. A
 * sequence *output* may have any length: kiln_engine_run_lists returns it as a list. */

/* The graph inputs of the ONNX model file at `path` (initializers left out), as a JSON array in
 * ONNX order, the caller's to free with kiln_string_free: [{"name": "x", "sequence": false},
 * ...]. For a loader that must give sequence inputs' element shapes before it loads. */
kiln_status kiln_onnx_file_inputs_json(const char* path, char** out_json);
/* Loading with `options` imports the sequence input `input` as `num_elements` elements, element
 * i of rank ranks[i] with dims taken in turn from `dims` (ranks[0] of them for element 0, then
 * ranks[1] ...); a dim of -1 is symbolic, so one model serves any size there. Setting an input
 * again replaces its elements. A sequence input without them is KILN_UNSUPPORTED naming it. */
kiln_status kiln_load_options_set_sequence_input(kiln_load_options* options, const char* input,
                                                 size_t num_elements, const size_t* ranks,
                                                 const int64_t* dims);
/* Whether output `index` is a sequence (1) or a tensor (0). A sequence output's type
 * (kiln_model_output_type) is its elements' dtype and rank. */
kiln_status kiln_model_output_is_sequence(const kiln_model* model, size_t index, int* out);

/* A list of tensors: a sequence output, or a sequence read from a file. Threading: immutable;
 * thread-safe. */
typedef struct kiln_tensor_list kiln_tensor_list;
kiln_status kiln_tensor_list_size(const kiln_tensor_list* list, size_t* out);
/* Tensor `index`, owned by the list (valid while it lives). */
kiln_status kiln_tensor_list_get(const kiln_tensor_list* list, size_t index,
                                 const kiln_tensor** out);
void kiln_tensor_list_destroy(kiln_tensor_list* list);
/* A serialized ONNX SequenceProto of tensors (a test case's input or output that is a
 * sequence), copied into a new list. Errors name the file. */
kiln_status kiln_tensor_list_read_onnx_pb(const char* path, kiln_tensor_list** out);

/* ---------------------------------------------------------------------------------------- */
/* Graph building                                                                            */
/* ---------------------------------------------------------------------------------------- */

/* Operator attributes by name, typed. Threading: one thread at a time. */
typedef struct kiln_attrs kiln_attrs;
kiln_status kiln_attrs_create(kiln_attrs** out);
void kiln_attrs_destroy(kiln_attrs* attrs);
/* Setting a name again replaces its value. Checked against the op's schema when used. */
kiln_status kiln_attrs_set_int(kiln_attrs* attrs, const char* name, int64_t value);
kiln_status kiln_attrs_set_float(kiln_attrs* attrs, const char* name, double value);
kiln_status kiln_attrs_set_string(kiln_attrs* attrs, const char* name, const char* value);
kiln_status kiln_attrs_set_ints(kiln_attrs* attrs, const char* name, const int64_t* values,
                                size_t count);
kiln_status kiln_attrs_set_floats(kiln_attrs* attrs, const char* name, const double* values,
                                  size_t count);
kiln_status kiln_attrs_set_dtype(kiln_attrs* attrs, const char* name, kiln_dtype value);
kiln_status kiln_attrs_set_bool(kiln_attrs* attrs, const char* name, int value);

/* Builds a graph value by value; a model is made from it by kiln_graph_builder_build, which
 * type-checks it. Threading: one thread at a time. */
typedef struct kiln_graph_builder kiln_graph_builder;
/* A value in one builder: an input, a constant, an op's result. Meaningless in another. */
typedef uint32_t kiln_value;

kiln_status kiln_graph_builder_create(const char* model_name, kiln_graph_builder** out);
void kiln_graph_builder_destroy(kiln_graph_builder* builder);
/* An input of type dtype[dims]: dim i is symbolic, named dim_names[i], when dim_names is not
 * NULL and dim_names[i] is not NULL (dims[i] is then ignored); else the constant dims[i] >= 0.
 * Names must be unique among the inputs. */
kiln_status kiln_graph_builder_add_input(kiln_graph_builder* builder, const char* name,
                                         kiln_dtype dtype, size_t rank, const int64_t* dims,
                                         const char* const* dim_names, kiln_value* out);
/* A constant holding a copy of the tensor's values (the tensor may be destroyed after). */
kiln_status kiln_graph_builder_add_constant(kiln_graph_builder* builder, const kiln_tensor* value,
                                            const char* name, kiln_value* out);
/* A call of the op `op` (`matmul`, `add`, `softmax`, ...) on `args`; `attrs` may be NULL, and
 * is copied. `node_name` (may be NULL) names the node in error messages. An unknown op is
 * KILN_NOT_FOUND; a wrong argument count or a bad attribute KILN_INVALID_ARGUMENT naming both. */
kiln_status kiln_graph_builder_add_op(kiln_graph_builder* builder, const char* op, size_t num_args,
                                      const kiln_value* args, const kiln_attrs* attrs,
                                      const char* node_name, kiln_value* out);
/* Field `index` of a value that is a tuple (an op with several results, e.g. `split`). */
kiln_status kiln_graph_builder_get_item(kiln_graph_builder* builder, kiln_value tuple, int index,
                                        kiln_value* out);
/* Marks `value` as the next output of the model, under `name` (unique among the outputs). */
kiln_status kiln_graph_builder_add_output(kiln_graph_builder* builder, kiln_value value,
                                          const char* name);
/* The model of the graph built so far; type errors are KILN_TYPE_ERROR naming the node. The
 * builder stays usable (later additions do not change models already built). */
kiln_status kiln_graph_builder_build(kiln_graph_builder* builder, kiln_model** out);

/* ---------------------------------------------------------------------------------------- */
/* Passes and instruments                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* Where a custom graph pass leaves its result. Valid only during the callback. */
typedef struct kiln_pass_result kiln_pass_result;
/* The module that replaces the pass's input, as text IR (copied). Not calling it leaves the
 * module unchanged. */
kiln_status kiln_pass_result_set_text(kiln_pass_result* result, const char* module_text);
/* A message for the error that a callback's non-OK return raises (copied). */
kiln_status kiln_pass_result_set_error(kiln_pass_result* result, const char* message);

/* A custom graph pass: receives the module as text IR (ir/text.h; weights larger than 64
 * elements print as `meta[i]`, which the replacement text may use too). Return KILN_OK to go
 * on; any other status fails the compile with that status and a message naming the pass.
 * Threading: engines compile different shapes at once on their callers' threads, so the
 * callback may run on several threads at once. */
typedef kiln_status (*kiln_graph_pass_fn)(const char* module_text, kiln_pass_result* result,
                                          void* user_data);

/* Registers a graph pass under `name` in the process-wide pass registry, so pipeline strings
 * (kiln_options_set_pipeline) and required/disabled pass lists can name it. It runs at
 * `opt_level` and above, after the passes in `required` (NULL when num_required is 0). A name
 * already registered is KILN_INVALID_ARGUMENT. Registrations last for the process; `user_data`
 * must stay valid that long. Thread-safe. */
kiln_status kiln_register_graph_pass(const char* name, int opt_level, size_t num_required,
                                     const char* const* required, kiln_graph_pass_fn fn,
                                     void* user_data);

/* The registered passes, sorted by name; thread-safe. A pass registered between calls may
 * shift the indices. The strings are the caller's (kiln_string_free); `required` is the
 * required passes joined by ','. Any output pointer may be NULL. */
kiln_status kiln_pass_count(size_t* out);
kiln_status kiln_pass_info(size_t index, char** name, int* opt_level, char** required);

/* Called before or after each pass of a compile (the graph passes; then, for each kernel not
 * found in the kernel cache, the loop passes that lower it), with the pass name, and the
 * module as text IR when the instrument asked for it (NULL otherwise). A pass that the opt
 * level or the disabled list skips gets no call. Threading: as kiln_graph_pass_fn. */
typedef void (*kiln_pass_hook)(const char* pass_name, const char* module_text, void* user_data);

/* ---------------------------------------------------------------------------------------- */
/* Engine options                                                                            */
/* ---------------------------------------------------------------------------------------- */

/* Threading: one thread at a time. An engine copies its options when created. */
typedef struct kiln_options kiln_options;
kiln_status kiln_options_create(kiln_options** out);
void kiln_options_destroy(kiln_options* options);

/* `llvm` (the host CPU, the default), `llvm -mcpu=znver3 -mattr=+avx2,+fma`, `cuda` (every
 * kernel on GPU cuda(0), for `-arch=sm_90` unless given), or JSON. kiln_engine_create fails
 * with KILN_UNSUPPORTED, saying why, where the target's device (or NVRTC) is missing. */
kiln_status kiln_options_set_target(kiln_options* options, const char* target);
kiln_status kiln_options_set_opt_level(kiln_options* options, int opt_level); /* 0-3, default 2 */
/* Kernel threads; 0 (the default) uses every core. */
kiln_status kiln_options_set_num_threads(kiln_options* options, int num_threads);
/* A directory for the disk kernel cache, so a new process starts warm; NULL or "" for none.
 * Created owner-only if missing; an existing one must be the user's, mode 0700. */
kiln_status kiln_options_set_cache_dir(kiln_options* options, const char* dir);
kiln_status kiln_options_set_cache_max_bytes(kiln_options* options, uint64_t max_bytes);
/* The memory all cached executables may keep, as the engine estimates it (their kernels' code
 * and IR, constants made for their shapes, their tables): past it the least recently used of
 * any model are evicted. 0 (the default): a sixteenth of the machine's memory, at least 64 MiB
 * and at most 1 GiB. kiln_engine_stats_json reports "cached_bytes" and "cache_budget_bytes". */
kiln_status kiln_options_set_max_cache_bytes(kiln_options* options, uint64_t max_bytes);
/* The most memory one run may take (its intermediates, plus its outputs where kiln allocates
 * them); a run over it is KILN_OUT_OF_MEMORY naming the limit, before anything is allocated.
 * 0 (the default): half the machine's memory. */
kiln_status kiln_options_set_max_run_bytes(kiln_options* options, uint64_t max_bytes);
/* Passes never run / always run, by registered name (appended to a list). */
kiln_status kiln_options_disable_pass(kiln_options* options, const char* pass);
kiln_status kiln_options_require_pass(kiln_options* options, const char* pass);
/* PassContext configuration by registered key (`loop.vectorize_width`, ...). */
kiln_status kiln_options_set_config_int(kiln_options* options, const char* key, int64_t value);
kiln_status kiln_options_set_config_float(kiln_options* options, const char* key, double value);
kiln_status kiln_options_set_config_string(kiln_options* options, const char* key,
                                           const char* value);
kiln_status kiln_options_set_config_bool(kiln_options* options, const char* key, int value);
/* The most shapes compiled per model (default 64); past it the least recently used goes.
 * 0: unbounded. */
kiln_status kiln_options_set_max_specializations(kiln_options* options, int max);
/* How a shape with no compiled executable yet is served: "tiered" (the default: the model's
 * shape-generic kernels serve it at once, and the shape is specialized on a background compile
 * pool and served specialized when ready; the generic kernels build on that pool from the
 * model's first run, whose shape, like any that comes before they are ready, compiles as under
 * "eager"), "eager" (the
 * run waits while its shape compiles) or "generic_only" (never specialized). A model whose dims
 * values decide, or with no symbolic dims, is served eagerly under every policy. */
kiln_status kiln_options_set_compile_policy(kiln_options* options, const char* policy);
/* Tiered: runs of a shape before it is queued for specialization (default 1), and the
 * background compile pool's threads (default 1). Both at least 1. */
kiln_status kiln_options_set_specialize_after(kiln_options* options, int runs);
kiln_status kiln_options_set_compile_threads(kiln_options* options, int threads);
/* Tiered: the niceness of the background compile thread, 0 to 19 (default 19: compiles take
 * the cores runs leave idle, and yield to runs). Linux, and a pool of one thread only (the
 * default; more would start oneTBB workers that inherit it); otherwise accepted and ignored. */
kiln_status kiln_options_set_compile_nice(kiln_options* options, int nice);
/* The graph pipeline as a pipeline string (`InferType,FoldConstant,MyPass`); NULL or "" for
 * the default. Checked now: a syntax error or an unknown pass is KILN_INVALID_ARGUMENT
 * naming it. */
kiln_status kiln_options_set_pipeline(kiln_options* options, const char* pipeline);
/* Profiling: per-pass compile times and per-kernel run times in the engine's statistics.
 * Off by default (then runs do no timing). */
kiln_status kiln_options_set_profiling(kiln_options* options, int enabled);
/* Tracing: a trace in the Chrome / Perfetto JSON format (chrome://tracing, ui.perfetto.dev) of
 * every compile (its phases, each pass, each kernel's lowering and code generation) and every
 * run and kernel launch, per thread, with shapes in the events' arguments; read it with
 * kiln_engine_trace_json. Off by default. It times every launch (as profiling does, so the
 * statistics' "kernels" fill too) and keeps an event per launch, up to 262144 events (then
 * counted in "otherData": {"dropped_events"}). */
kiln_status kiln_options_set_trace(kiln_options* options, int enabled);
/* Adds an instrument to every compile of engines made from these options. `before` and/or
 * `after` may be NULL. `with_ir` nonzero passes the module text to the hooks (costly).
 * `user_data` must outlive those engines. */
kiln_status kiln_options_add_instrument(kiln_options* options, kiln_pass_hook before,
                                        kiln_pass_hook after, int with_ir, void* user_data);
/* As kiln_options_add_instrument, with the module text passed to the hooks of the passes named
 * in `passes` only (comma-separated, e.g. "FuseOps,VectorizeLoops"; NULL elsewhere): text is
 * made only where it is wanted. Names are registered passes or the pipelines that hold them
 * (GraphPipeline, LoopPipeline, GpuLoopPipeline, Sequential); an unknown or empty one is an
 * error. */
kiln_status kiln_options_add_instrument_ir_of(kiln_options* options, kiln_pass_hook before,
                                              kiln_pass_hook after, const char* passes,
                                              void* user_data);

/* ---------------------------------------------------------------------------------------- */
/* Engines and runs                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* Compiles each model once per set of input shapes and runs it.
 * Threading: thread-safe; many threads may run one model at once with different shapes (a
 * shape being compiled is compiled once; other callers wait). Destroy it only after its runs
 * have returned. */
typedef struct kiln_engine kiln_engine;

/* `options` may be NULL (defaults); they are copied. Bad options are reported here, naming
 * the option. */
kiln_status kiln_engine_create(const kiln_options* options, kiln_engine** out);
void kiln_engine_destroy(kiln_engine* engine);

/* Runs `model` on the inputs.
 *   Inputs: input_names[i] names the model input that inputs[i] feeds; every model input must
 *   be given exactly once. input_names may be NULL: the inputs are then in model order.
 *   Outputs: output_names[j] names the model output that goes to outputs[j] (a subset of the
 *   outputs, in any order); output_names may be NULL: all outputs, in model order. A slot
 *   outputs[j] that is NULL receives a new tensor (the caller's, to destroy); a non-NULL one
 *   is written in place and must have the output's dtype and shape.
 * Errors name the input or output with the expected and given types; on failure no slot is
 * written (in-place outputs may hold partial results). When every output is given in place,
 * in model order (output_names NULL or in that order), the run on a compiled shape writes
 * straight into them and allocates nothing on the heap. */
kiln_status kiln_engine_run(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                            const char* const* input_names, const kiln_tensor* const* inputs,
                            size_t num_outputs, const char* const* output_names,
                            kiln_tensor** outputs);

/* Runs `model` as kiln_engine_run does (inputs alike) and returns every output, in model
 * order, as a new list, the caller's to destroy: a tensor output's list holds it alone, a
 * sequence output's its elements. `num_outputs` must be the model's output count. The way to
 * run a model with sequence outputs: kiln_engine_run, its asynchronous form and bindings refuse
 * one, naming the output. */
kiln_status kiln_engine_run_lists(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                  const char* const* input_names, const kiln_tensor* const* inputs,
                                  size_t num_outputs, kiln_tensor_list** outputs);

/* A prepared run of one model on one engine: each input and output bound once by name (the
 * name looked up and the tensor's type checked then), then run any number of times, with no
 * name lookup and, on a compiled shape, no heap allocation. The binding holds the bound
 * tensors (sharing their memory: write new input values into it and run again; a handle may
 * be destroyed once bound). Binding again replaces a slot's tensor. The engine and model must
 * outlive the binding. Threading: one thread at a time per binding; any number of bindings
 * may run on one engine at once. */
typedef struct kiln_binding kiln_binding;
kiln_status kiln_binding_create(kiln_engine* engine, const kiln_model* model, kiln_binding** out);
void kiln_binding_destroy(kiln_binding* binding);
/* An unknown name is KILN_NOT_FOUND naming the model's; a tensor whose dtype, rank or constant
 * dims do not fit is KILN_INVALID_ARGUMENT naming the input or output. */
kiln_status kiln_binding_bind_input(kiln_binding* binding, const char* name,
                                    const kiln_tensor* tensor);
kiln_status kiln_binding_bind_output(kiln_binding* binding, const char* name, kiln_tensor* tensor);
/* Runs the model on the bound inputs into the bound outputs, as kiln_engine_run with every
 * output in place. A slot not bound is KILN_INVALID_ARGUMENT naming it. */
kiln_status kiln_binding_run(kiln_binding* binding);

/* Runs `model` with each op's reference kernel, in dataflow order, compiling nothing: slow,
 * and the oracle that compiled kernels are tested against (to check an engine's numbers, or to
 * find which engine option changes them). Inputs and outputs follow kiln_engine_run's rules;
 * outputs given in place are filled by a copy. */
kiln_status kiln_model_run_reference(const kiln_model* model, size_t num_inputs,
                                     const char* const* input_names,
                                     const kiln_tensor* const* inputs, size_t num_outputs,
                                     const char* const* output_names, kiln_tensor** outputs);

/* Asynchronous runs. A stream is an ordered queue of runs for one engine: the runs enqueued on
 * it execute one after another, in order, on the stream's own thread (a CPU device stream);
 * runs on different streams overlap. For an engine whose target is a device (`cuda`), each
 * stream also has a stream of that device, on which its runs launch their kernels, so they
 * overlap there too. The engine must outlive its streams. */
typedef struct kiln_stream kiln_stream;
kiln_status kiln_stream_create(kiln_engine* engine, kiln_stream** out);
/* Waits for the runs enqueued on the stream, then frees it. */
void kiln_stream_destroy(kiln_stream* stream);

/* One asynchronous run: whether it has finished, and how. */
typedef struct kiln_run kiln_run;

/* Checks the arguments as kiln_engine_run does (an error is returned here and nothing is
 * enqueued), enqueues the run on `stream` and returns at once with `*out_run`, the caller's to
 * free with kiln_run_destroy. The run holds its inputs (a tensor from kiln_tensor_wrap must
 * keep its memory until the run has finished); it writes the output slots when it executes,
 * so the `outputs` array, the tensors given in place, `model` and `engine` must stay alive
 * until kiln_run_wait has returned. Outputs follow kiln_engine_run's rules. */
kiln_status kiln_engine_run_async(kiln_engine* engine, const kiln_model* model, kiln_stream* stream,
                                  size_t num_inputs, const char* const* input_names,
                                  const kiln_tensor* const* inputs, size_t num_outputs,
                                  const char* const* output_names, kiln_tensor** outputs,
                                  kiln_run** out_run);
/* Blocks until the run has finished and returns its status: KILN_OK, its error (with
 * kiln_last_error set on this thread), or KILN_CANCELLED. May be called again, from any thread. */
kiln_status kiln_run_wait(kiln_run* run);
/* `*done` is 1 once the run has finished (kiln_run_wait then returns at once), else 0. */
kiln_status kiln_run_is_done(const kiln_run* run, int* done);
/* Asks the run to stop: a run that has not started never starts; a running one stops before
 * its next kernel launch (the kernel running finishes). It then ends with KILN_CANCELLED and
 * makes no output handle (outputs given in place may hold partial results). A run that has
 * finished is left as it is. */
kiln_status kiln_run_cancel(kiln_run* run);
/* Waits for the run, then frees it. */
void kiln_run_destroy(kiln_run* run);

/* Compiles `model` for these inputs' shapes without running it (same arguments as a run's
 * inputs). */
kiln_status kiln_engine_prepare(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs);

/* Writes the kernels `model` compiles to for these inputs' shapes into `out_dir` (created if
 * missing), one file per fused group, for `target` (a target string; NULL or "": the engine's):
 * with a "cuda -arch=sm_XX" target, CUDA C (`format` "cuda", NAME.cu) or PTX ("ptx", NAME.ptx,
 * which needs NVRTC but no GPU); with an "llvm" target, optimized LLVM IR ("llvm", NAME.ll)
 * or the machine code's assembly ("asm", NAME.s).
 * Nothing runs or is cached. On success `*out_json` (when not NULL) is a JSON array of the paths
 * written, which the caller frees with kiln_string_free. */
kiln_status kiln_engine_emit_kernels(kiln_engine* engine, const kiln_model* model,
                                     size_t num_inputs, const char* const* input_names,
                                     const kiln_tensor* const* inputs, const char* target,
                                     const char* format, const char* out_dir, char** out_json);

/* What would serve a run on these inputs now, as a JSON object the caller frees with
 * kiln_string_free: {"shape_key", "cached" (bool), "tier" ("specialized" or "generic"),
 * "reason"}. On a miss "reason" says which part of the shape key is new (`input 'x' dim 0 is
 * 7; cached: 1, 3`, or `first run of model 'mlp'`); "" on a hit. A model run in segments (a
 * data-dependent op) is explained by its head, the part the inputs key, and "segments" says so
 * and names the op. Looks only: nothing compiles or counts. Inputs as for a run. */
kiln_status kiln_engine_explain(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs,
                                char** out_json);

/* Warm start. save_shapes writes the shapes of `model` the engine has cached, with their run
 * counts, to a text file (`RUNS NAME=DIMS ...` a line; a model whose input values set shapes
 * records none). precompile_shapes reads such a file and compiles the specialized executable of
 * each shape without running it, whatever the policy; with the disk cache (cache_dir) of the
 * process that ran them, LLVM does not run. Errors name the file, its line and what is wrong. */
kiln_status kiln_engine_save_shapes(const kiln_engine* engine, const kiln_model* model,
                                    const char* path);
kiln_status kiln_engine_precompile_shapes(kiln_engine* engine, const kiln_model* model,
                                          const char* path);

/* Blocks until the engine's background compiles (the tiered policy) are done: every shape run
 * so far and due for specialization is then served specialized (or failed to compile, counted
 * in "compile_errors", and stays on its generic kernels). */
kiln_status kiln_engine_wait_background_compiles(kiln_engine* engine);

/* The engine's statistics as a JSON object, the caller's to free with kiln_string_free:
 *   {"runs", "hits", "misses", "specializations", "compile_errors", "evictions",
 *    "evicted_served_generic", "respecializations", "generic_runs", "generic_builds",
 *    "generic_unavailable", "background_queued", "background_dropped", "cached_executables",
 *    "cached_bytes", "cache_budget_bytes", "kernel_compiles", "kernel_cache_hits", "disk_hits",
 *    "disk_rejections", "disk_rejections_by_reason": {reason: n}, "compile_ms",
 *    "planned_peak_bytes",
 *    "shapes": [{"shape_key", "compile_ms", "kernels", "planned_peak_bytes", "naive_bytes",
 *                "passes": [{"name", "calls", "total_ms", "self_ms", "children": [...]}]}],
 *    "kernels": [{"shape_key", "kernel", "calls", "total_ms"}]}
 * "passes" and "kernels" are filled when profiling is on (empty otherwise). Keys are only
 * added over versions. */
kiln_status kiln_engine_stats_json(const kiln_engine* engine, char** out_json);

/* The engine's trace so far (kiln_options_set_trace), as a Chrome / Perfetto trace JSON object,
 * the caller's to free with kiln_string_free: {"traceEvents": [...]} of complete events ("ph":
 * "X", microseconds) ordered by start, an enclosing event before those it contains; "cat" is
 * "compile", "pass", "run" or "kernel". KILN_INVALID_ARGUMENT when the engine does not trace. */
kiln_status kiln_engine_trace_json(const kiln_engine* engine, char** out_json);

/* ---------------------------------------------------------------------------------------- */
/* The disk kernel cache                                                                     */
/* ---------------------------------------------------------------------------------------- */

/* The entries of a disk cache directory (kiln_options_set_cache_dir), which must exist, as a
 * JSON array the caller frees with kiln_string_free, one object per entry by file name:
 * {"file", "bytes", "modified" (Unix seconds: last write or use), "status" ("ok", or why an
 * engine of this build would not use it: "other_build", "checksum", ...), "kernel", "target",
 * "signature" (the fused group's parameter and result types), "kiln" (the version that wrote
 * it), "identity" (the code generator's: LLVM version, CPU and features)}. Reads only.
 * KILN_NOT_FOUND when the directory does not exist; KILN_INVALID_ARGUMENT when it is not a
 * cache kiln may use (another user's, or open to others). */
kiln_status kiln_cache_list_json(const char* dir, char** out_json);
/* Removes every entry (and temporary file) of a disk cache directory, nothing else in it;
 * `*removed` (may be NULL) gets how many. Engines using it meanwhile only recompile. Errors as
 * kiln_cache_list_json's. */
kiln_status kiln_cache_clear(const char* dir, uint64_t* removed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_H_ */
