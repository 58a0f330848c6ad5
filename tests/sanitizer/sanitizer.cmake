# Runtime options of the DNN_SANITIZE build's tests (included by tests/CMakeLists.txt; appends to
# DNN_TEST_ENV, which every C and script test gets):
#   - UBSan reports fail the test (halt_on_error) instead of scrolling by, except the
#     third-party ones explained in ubsan.supp;
#   - LeakSanitizer reads the explained suppressions in lsan.supp, which match only on whole
#     stacks (fast_unwind_on_malloc=0; the leaking library frames have no frame pointers);
#   - detect_leaks is explicit so a changed default cannot silently turn leak checking off.
if(DNN_SANITIZE)
  list(APPEND DNN_TEST_ENV
    "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=${CMAKE_CURRENT_LIST_DIR}/ubsan.supp")
endif()
