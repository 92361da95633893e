// The run-time loader of cuBLAS (qsgd/models/detail/cublas_runtime.hpp),
// against stand-in libraries (fake_cublas.cpp): every function resolved and
// called with its arguments in order, the version and file it reports, the
// function a library lacks and every place it looked named in the error,
// and QSGD_CUBLAS taking the place of the search.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>

#include "qsgd/models/detail/cublas_runtime.hpp"

namespace qd = qsgd::models::detail;

namespace {

std::string real(const char* path) {
  char buf[PATH_MAX];
  return realpath(path, buf) ? buf : path;
}

std::string error_of(const std::vector<std::string>& candidates) {
  try {
    qd::load_cublas(candidates);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CublasRuntime, ResolvesEveryFunctionAndReportsVersionAndFile) {
  const auto rt = qd::load_cublas({QSGD_FAKE_CUBLAS});
  EXPECT_EQ(rt.version, "13.0.7");
  EXPECT_EQ(rt.path, real(QSGD_FAKE_CUBLAS));
  void* h = nullptr;
  ASSERT_EQ(rt.create(&h), 0);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(rt.set_stream(h, nullptr), 0);
  const float alpha = 1.5f, beta = 0.25f;
  float c = 0;
  // ta, tb, m, n, k, lda, ldb, ldc arrive in order (the stand-in folds them into its status).
  EXPECT_EQ(rt.sgemm(h, 1, 0, 2, 3, 4, &alpha, nullptr, 5, nullptr, 6, &beta, &c, 7), 10234567);
  EXPECT_FLOAT_EQ(c, 3.25f);
  const double da = 2.0, db = 1.0;
  double dc = 0;
  EXPECT_EQ(rt.dgemm(h, 0, 1, 9, 8, 7, &da, nullptr, 6, nullptr, 5, &db, &dc, 4), 1987654);
  EXPECT_DOUBLE_EQ(dc, 7.0);
  EXPECT_EQ(rt.destroy(h), 0);
}

// A library that loads but lacks a function is an error, not a reason to try the next.
TEST(CublasRuntime, ALoadedLibraryLackingAFunctionIsAnError) {
  const auto what = error_of({"/nonexistent/libcublas.so.13", QSGD_FAKE_CUBLAS_NO_DGEMM, QSGD_FAKE_CUBLAS});
  EXPECT_NE(what.find("does not export cublasDgemm_v2"), std::string::npos) << what;
}

TEST(CublasRuntime, NamesTheFunctionALibraryLacks) {
  const auto what = error_of({QSGD_FAKE_CUBLAS_NO_DGEMM});
  EXPECT_NE(what.find("does not export cublasDgemm_v2"), std::string::npos) << what;
  EXPECT_NE(what.find(QSGD_FAKE_CUBLAS_NO_DGEMM), std::string::npos) << what;
}

TEST(CublasRuntime, NamesEveryPlaceItLookedWhenNoneLoads) {
  const auto what = error_of({"/nonexistent/libcublas.so.13", "libqsgd-no-such-cublas.so.12"});
  EXPECT_NE(what.find("no library could be loaded"), std::string::npos) << what;
  EXPECT_NE(what.find("/nonexistent/libcublas.so.13"), std::string::npos) << what;
  EXPECT_NE(what.find("libqsgd-no-such-cublas.so.12"), std::string::npos) << what;
  EXPECT_NE(what.find("QSGD_CUBLAS"), std::string::npos) << what;
}

TEST(CublasRuntime, SkipsCandidatesThatDoNotLoad) {
  const auto rt = qd::load_cublas({"/nonexistent/libcublas.so.13", QSGD_FAKE_CUBLAS});
  EXPECT_EQ(rt.path, real(QSGD_FAKE_CUBLAS));
}

TEST(CublasRuntime, QsgdCublasReplacesTheSearch) {
  unsetenv("QSGD_CUBLAS");
  const auto search = qd::cublas_candidates();
  ASSERT_EQ(search.size(), 4u);
  EXPECT_EQ(search.front(), "libcublas.so.13");
  EXPECT_EQ(search.back(), "libcublas.so");
  setenv("QSGD_CUBLAS", QSGD_FAKE_CUBLAS, 1);
  EXPECT_EQ(qd::cublas_candidates(), std::vector<std::string>{QSGD_FAKE_CUBLAS});
  unsetenv("QSGD_CUBLAS");
}
