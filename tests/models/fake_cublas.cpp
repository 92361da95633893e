// A stand-in for cuBLAS with the functions qsgd::models loads at run time
// (models/include/qsgd/models/detail/cublas_runtime.hpp), for the host tests
// of the loader: version 13.0.7; each product returns its dimensions and
// operations folded into one number, so that a test sees its arguments
// arrive in order. Built without cublasDgemm_v2 when FAKE_CUBLAS_NO_DGEMM
// is defined.
namespace {
int handle_storage;
int fold(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
  return ((((((ta * 10 + tb) * 10 + m) * 10 + n) * 10 + k) * 10 + lda) * 10 + ldb) * 10 + ldc;
}
}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) {
  *handle = &handle_storage;
  return 0;
}
int cublasDestroy_v2(void* handle) { return handle == &handle_storage ? 0 : 7; }
int cublasSetStream_v2(void* handle, void* stream) { return handle == &handle_storage && stream == nullptr ? 0 : 7; }
int cublasGetProperty(int type, int* value) {
  static const int parts[3] = {13, 0, 7};
  if (type < 0 || type > 2) return 7;
  *value = parts[type];
  return 0;
}
int cublasSgemm_v2(void*, int ta, int tb, int m, int n, int k, const float* alpha, const float*, int lda,
                   const float*, int ldb, const float* beta, float* c, int ldc) {
  c[0] = *alpha * 2.0f + *beta;
  return fold(ta, tb, m, n, k, lda, ldb, ldc);
}
#ifndef FAKE_CUBLAS_NO_DGEMM
int cublasDgemm_v2(void*, int ta, int tb, int m, int n, int k, const double* alpha, const double*, int lda,
                   const double*, int ldb, const double* beta, double* c, int ldc) {
  c[0] = *alpha * 3.0 + *beta;
  return fold(ta, tb, m, n, k, lda, ldb, ldc);
}
#endif

}  // extern "C"
