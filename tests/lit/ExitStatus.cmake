# Runs `sharc compile` on every bad-input case and requires exit status 2.
file(GLOB cases ${CASES}/*.yaml)
list(LENGTH cases count)
if(count LESS 15)
  message(FATAL_ERROR "expected at least 15 bad-input cases, found ${count}")
endif()
foreach(case ${cases})
  execute_process(COMMAND ${SHARC} compile ${case} -o /dev/null
                  RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT status EQUAL 2)
    message(FATAL_ERROR "${case}: exit status ${status}, expected 2\n${err}")
  endif()
  if(NOT err MATCHES "^sharc: error: ")
    message(FATAL_ERROR "${case}: message does not start with "
                        "'sharc: error: ':\n${err}")
  endif()
endforeach()
message(STATUS "${count} bad-input cases exit with status 2")
