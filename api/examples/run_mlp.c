/* Runs an ONNX model of one f32 input [batch, features] through libkiln and prints its first
 * output: the program README.md shows, built against an installed kiln with pkg-config
 * (tests/c_api/install_test.sh builds and checks it).
 *
 *   cc run_mlp.c $(pkg-config --cflags --libs kiln) -o run_mlp && ./run_mlp mlp.onnx 3
 *
 * The input is x[i][j] = sin(0.01 * (i * features + j)), so a test can compute the same. */
#include <kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.onnx BATCH\n", argv[0]);
    return 2;
  }
  const int64_t batch = atoll(argv[2]);
  kiln_model* model = NULL;
  kiln_engine* engine = NULL;
  kiln_tensor* x = NULL;
  kiln_tensor* y = NULL;
  int64_t features = 0;
  float* out = NULL;
  size_t nbytes = 0;
  int rc = 1;
  if (kiln_model_load_onnx_file(argv[1], &model) ||
      kiln_model_input_dim(model, 0, 1, &features, NULL) || kiln_engine_create(NULL, &engine))
    goto fail;
  const int64_t shape[2] = {batch, features};
  if (kiln_tensor_create(KILN_F32, 2, shape, &x)) goto fail;
  float* data = NULL;
  if (kiln_tensor_data(x, (void**)&data)) goto fail;
  for (int64_t i = 0; i < batch * features; ++i) data[i] = (float)sin(0.01 * (double)i);
  const kiln_tensor* inputs[1] = {x};
  if (kiln_engine_run(engine, model, 1, NULL, inputs, 1, NULL, &y) ||
      kiln_tensor_nbytes(y, &nbytes))
    goto fail;
  out = malloc(nbytes ? nbytes : 1);
  if (!out || kiln_tensor_copy_to_host(y, out, nbytes)) goto fail;
  for (size_t i = 0; i < nbytes / sizeof(float); ++i) printf("%.7g\n", out[i]);
  rc = 0;
fail:
  if (rc) fprintf(stderr, "run_mlp: %s\n", kiln_last_error());
  free(out);
  kiln_tensor_destroy(y);
  kiln_tensor_destroy(x);
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
  return rc;
}
