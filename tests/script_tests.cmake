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
# contract_result_lines checks the result lines the others recorded (tests/scripts/lib.sh), so
# it runs after them when they are selected too (DEPENDS orders, it does not add tests).
set(_others ${DNN_SCRIPT_TESTS})
list(FILTER _others EXCLUDE REGEX "/contract_result_lines\\.sh$")
set(_deps "")
foreach(script ${_others})
  get_filename_component(name ${script} NAME_WE)
  list(APPEND _deps ${name})
endforeach()
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/contract_result_lines.sh)
  set_tests_properties(contract_result_lines PROPERTIES DEPENDS "${_deps}" RUN_SERIAL TRUE)
endif()
