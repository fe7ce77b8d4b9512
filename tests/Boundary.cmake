# The runtime side (executor/, kernels/, planner/plan/, tools/sharc-run/)
# must not include MLIR or LLVM headers, and sharc-run must not link them:
# it has to run on GPU nodes without LLVM.
file(GLOB_RECURSE sources
     ${SOURCE_DIR}/executor/*.h ${SOURCE_DIR}/executor/*.cpp
     ${SOURCE_DIR}/kernels/*.h ${SOURCE_DIR}/kernels/*.cpp
     ${SOURCE_DIR}/kernels/*.cu ${SOURCE_DIR}/planner/plan/*.h
     ${SOURCE_DIR}/planner/plan/*.cpp ${SOURCE_DIR}/tools/sharc-run/*.cpp)
foreach(source ${sources})
  file(STRINGS ${source} includes REGEX "^#include [<\"](mlir|llvm)/")
  if(includes)
    message(FATAL_ERROR "${source} includes ${includes}")
  endif()
endforeach()
execute_process(COMMAND ldd ${SHARC_RUN} OUTPUT_VARIABLE libraries)
if(libraries MATCHES "lib(LLVM|MLIR)")
  message(FATAL_ERROR "sharc-run links LLVM or MLIR:\n${libraries}")
endif()
list(LENGTH sources count)
message(STATUS "${count} runtime sources are free of MLIR/LLVM")
