# Man pages of the sbx command, generated from its --help texts by
# help2man (cmake/man.sh) and installed with the sbx component. Without
# help2man there are none (a packaging build requires it: Packaging.cmake).
find_program(SBX_HELP2MAN help2man)
if(SBX_HELP2MAN AND TARGET sbx_cli)
  set(SBX_MAN_DIR ${CMAKE_BINARY_DIR}/man)
  add_custom_command(OUTPUT ${SBX_MAN_DIR}/sbx.1.gz
    COMMAND sh ${CMAKE_SOURCE_DIR}/cmake/man.sh $<TARGET_FILE:sbx_cli> ${SBX_MAN_DIR}
    DEPENDS sbx_cli ${CMAKE_SOURCE_DIR}/cmake/man.sh
    COMMENT "Writing the man pages of sbx (help2man)")
  add_custom_target(sbx_man ALL DEPENDS ${SBX_MAN_DIR}/sbx.1.gz)
  install(DIRECTORY ${SBX_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
          COMPONENT sbx FILES_MATCHING PATTERN "*.1.gz")
endif()
