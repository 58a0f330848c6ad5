# Script-driven tests: tests/scripts/<label>_<name>.sh runs with STARPU_ANP pointing at the
# built app and DNN_BUILD_DIR / DNN_SOURCE_DIR set. Exit 77 = skipped.
file(GLOB DNN_SCRIPT_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/*_*.sh)
foreach(script ${DNN_SCRIPT_TESTS})
  get_filename_component(name ${script} NAME_WE)
  string(REGEX MATCH "^[a-z]+" label ${name})
  add_test(NAME ${name} COMMAND bash ${script})
  set_tests_properties(${name} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77 TIMEOUT 1200
    ENVIRONMENT "${DNN_TEST_ENV};STARPU_ANP=$<TARGET_FILE:starpu_anp>;DNN_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endforeach()
