# varsync-trace (scripts/trace/varsync_trace.cpp): merges the flight
# recorders of a strategy's processes (rule M7) into one report of who is
# where. It reads JSON only and links nothing of varsync.
add_executable(varsync-trace ${PROJECT_SOURCE_DIR}/scripts/trace/varsync_trace.cpp)
target_compile_features(varsync-trace PRIVATE cxx_std_20)
target_compile_options(varsync-trace PRIVATE -Wall -Wextra -Wpedantic)
