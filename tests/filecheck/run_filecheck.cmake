# Runs one FileCheck test (Triton/MLIR lit style, without lit).
#   cmake -DCLI=<flashjit> -DFILECHECK=<FileCheck> -DCHECK_FILE=<x.check> -P run_filecheck.cmake
#
# Every line of the .check file that starts with "// RUN:" is one run:
#   // RUN: <flashjit subcommand and arguments> [| <extra FileCheck arguments>]
# e.g.
#   // RUN: ptx fwd_bf16_d128_noncausal_even_sm90
#   // RUN: ptx fwd_bf16_d128_noncausal_padded_sm90 | --check-prefix=PADDED
# The CLI's stdout is saved to <name>.<n>.out in the working directory (kept
# for reading after a failure) and checked by FileCheck against the .check
# file. The test fails if the CLI or FileCheck exits non-zero, or if the file
# has no RUN line.
foreach(var CLI FILECHECK CHECK_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_filecheck.cmake: -D${var}=... is required")
  endif()
endforeach()

file(STRINGS "${CHECK_FILE}" run_lines REGEX "^// RUN:")
if(NOT run_lines)
  message(FATAL_ERROR "${CHECK_FILE}: no '// RUN:' line")
endif()

get_filename_component(name "${CHECK_FILE}" NAME_WE)
set(n 0)
foreach(line IN LISTS run_lines)
  string(REGEX REPLACE "^// RUN:[ \t]*" "" run "${line}")
  string(FIND "${run}" "|" bar)
  if(bar EQUAL -1)
    set(cli_part "${run}")
    set(fc_part "")
  else()
    string(SUBSTRING "${run}" 0 ${bar} cli_part)
    math(EXPR after "${bar} + 1")
    string(SUBSTRING "${run}" ${after} -1 fc_part)
  endif()
  separate_arguments(cli_args UNIX_COMMAND "${cli_part}")
  separate_arguments(fc_args UNIX_COMMAND "${fc_part}")
  if(NOT cli_args)
    message(FATAL_ERROR "${CHECK_FILE}: empty RUN line: ${line}")
  endif()

  set(out "${CMAKE_CURRENT_BINARY_DIR}/${name}.${n}.out")
  string(JOIN " " shown ${cli_args})
  message(STATUS "RUN ${n}: flashjit ${shown}")
  execute_process(COMMAND "${CLI}" ${cli_args}
                  OUTPUT_FILE "${out}" ERROR_VARIABLE cli_err RESULT_VARIABLE cli_rc)
  if(NOT cli_rc EQUAL 0)
    message(FATAL_ERROR "${CHECK_FILE}: 'flashjit ${cli_part}' exited with ${cli_rc}:\n${cli_err}")
  endif()

  execute_process(COMMAND "${FILECHECK}" "${CHECK_FILE}" "--input-file=${out}" --dump-input=fail
                          ${fc_args}
                  OUTPUT_VARIABLE fc_out ERROR_VARIABLE fc_err RESULT_VARIABLE fc_rc)
  if(NOT fc_rc EQUAL 0)
    message(FATAL_ERROR "${CHECK_FILE}: FileCheck ${fc_args} failed on the output of "
                        "'flashjit ${cli_part}' (saved in ${out}):\n${fc_out}${fc_err}")
  endif()
  math(EXPR n "${n} + 1")
endforeach()
message(STATUS "${name}: ${n} run(s) passed")
