# Debian packages of sbx, one per install component (CPack's DEB generator).
#
#   scripts/package.sh            configure build/pkg for /usr and /etc,
#                                 build, and write build/pkg/*.deb
#
# which amounts to a build configured with -DSBX_PACKAGING=ON
# -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc and then
# `cmake --build build/pkg --target package`.
#
# Packages and what they hold:
#   sbx                    the CLI, the local provider, sbx.yaml.example,
#                          completions, man pages, the reconciler's unit
#   libsbx1                libsbx.so.1 (SONAME libsbx.so.1, symbols SBX_1)
#   libsbx-dev             sbx/sbx.h, session.h, manifest.h, memory.h,
#                          types.h (shared with the provider ABI),
#                          libsbx.so, sbx.pc
#   libsbx-conformance0    libsbx-conformance.so.0, which `sbx conformance`
#                          runs
#   sbx-provider-dev       sbx/provider.h, sbx-provider.pc, the conformance
#                          library's header, link and .pc, the provider
#                          template and docs/WRITING-A-PROVIDER.md
#   sbx-provider-NAME      NAME.so in the provider directory and its drop-in
#                          /etc/sbx/conf.d/NAME.yaml (docker: also sbx-agent)
# Depends come from dpkg-shlibdeps for system libraries and from the
# component dependencies below (exact version) for the project's own.
option(SBX_PACKAGING "Configure the Debian packages (cpack, target package)" OFF)
if(NOT SBX_PACKAGING)
  return()
endif()
if(NOT IS_ABSOLUTE "${CMAKE_INSTALL_SYSCONFDIR}")
  message(FATAL_ERROR "SBX_PACKAGING: set CMAKE_INSTALL_SYSCONFDIR to an absolute "
          "directory (/etc), or the configuration lands under the prefix")
endif()
if(SBX_TEST_HOOKS)
  message(FATAL_ERROR "SBX_PACKAGING: the test-only crash points (SBX_TEST_HOOKS) must not "
          "be packaged")
endif()
if(NOT SBX_HELP2MAN)
  message(FATAL_ERROR "SBX_PACKAGING: help2man is needed for the man pages")
endif()

set(SBX_PACKAGE_MAINTAINER "sbx developers <sbx-dev@example.org>" CACHE STRING
    "Maintainer field of the Debian packages")
get_property(SBX_PROVIDERS GLOBAL PROPERTY SBX_PROVIDERS)
list(REMOVE_ITEM SBX_PROVIDERS local)

# Each package's /usr/share/doc/PACKAGE: copyright and a changelog in
# Debian format (a native package: changelog.gz), compressed
# reproducibly. The date honours SOURCE_DATE_EPOCH.
string(TIMESTAMP SBX_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(SBX_PKG_DIR ${CMAKE_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${SBX_PKG_DIR})
file(WRITE ${SBX_PKG_DIR}/changelog
"sbx (${PROJECT_VERSION}) unstable; urgency=medium

  * Release ${PROJECT_VERSION}: see the project's git history.

 -- ${SBX_PACKAGE_MAINTAINER}  ${SBX_PACKAGE_DATE}
")
execute_process(COMMAND gzip -9nf ${SBX_PKG_DIR}/changelog RESULT_VARIABLE gz_rc)
if(gz_rc)
  message(FATAL_ERROR "gzip of the package changelog failed")
endif()

# sbx_package(COMPONENT PACKAGE SECTION SUMMARY DESCRIPTION [CONFFILES files...])
function(sbx_package component package section summary description)
  cmake_parse_arguments(P "LDCONFIG" "" "CONFFILES;DEPENDS" ${ARGN})
  string(TOUPPER ${component} C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${package} PARENT_SCOPE)
  set(CPACK_DEBIAN_${C}_PACKAGE_SECTION ${section} PARENT_SCOPE)
  set(CPACK_COMPONENT_${C}_DISPLAY_NAME ${package} PARENT_SCOPE)
  # The control file's Description: a summary line, then the extended text
  # (CPack indents each line by one space).
  string(REGEX REPLACE "(^|\n) " "\\1" description "${description}")
  set(CPACK_COMPONENT_${C}_DESCRIPTION "${summary}\n${description}" PARENT_SCOPE)
  set(CPACK_COMPONENT_${C}_DEPENDS ${P_DEPENDS} PARENT_SCOPE)
  install(FILES ${CMAKE_SOURCE_DIR}/etc/packaging/copyright ${SBX_PKG_DIR}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  # Justified lintian overrides (etc/packaging/lintian/PACKAGE).
  if(EXISTS ${CMAKE_SOURCE_DIR}/etc/packaging/lintian/${package})
    install(FILES ${CMAKE_SOURCE_DIR}/etc/packaging/lintian/${package}
            DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
  set(extra)
  if(P_CONFFILES)
    list(JOIN P_CONFFILES "\n" text)
    file(WRITE ${SBX_PKG_DIR}/${component}/conffiles "${text}\n")
    list(APPEND extra ${SBX_PKG_DIR}/${component}/conffiles)
  endif()
  # Public shared libraries: the ldconfig trigger (CPack adds ldconfig
  # calls to postinst and postrm as well).
  if(P_LDCONFIG)
    list(APPEND extra ${CMAKE_SOURCE_DIR}/etc/packaging/triggers)
  endif()
  set(CPACK_DEBIAN_${C}_PACKAGE_CONTROL_EXTRA "${extra}" PARENT_SCOPE)
endfunction()

set(etc ${CMAKE_INSTALL_SYSCONFDIR}/sbx)
sbx_package(sbx sbx admin "sandbox host for agent runtimes (CLI and local provider)"
" sbx runs commands and file operations in one isolated workspace per
 session. Where the workspace lives is decided by a provider plugin; this
 package has the sbx command, the local provider (host processes, not a
 security boundary), an example configuration, shell completions, man
 pages and the systemd unit of the session reconciler. Install a
 sbx-provider-NAME package for each other backend."
  DEPENDS libsbx conformance_lib
  CONFFILES ${etc}/sbx.yaml.example ${etc}/conf.d/README)
# dlopened by `sbx reconcile --metrics` (host/cli/mhd_lazy.h), so
# dpkg-shlibdeps does not see it; CPack adds the computed ones to this.
set(CPACK_DEBIAN_SBX_PACKAGE_DEPENDS "libmicrohttpd12")
sbx_package(libsbx libsbx1 libs "sandbox host library (libsbx)"
" libsbx is the library behind the sbx command: host contexts, provider
 loading and validation, sandboxes and durable sessions with SQLite or
 PostgreSQL stores. Agent runtimes link it (package libsbx-dev)."
  LDCONFIG)
sbx_package(libsbx_dev libsbx-dev libdevel "sandbox host library (development files)"
" Headers (sbx/sbx.h, sbx/session.h, sbx/manifest.h, sbx/memory.h and
 sbx/types.h, which the provider ABI shares), the
 link-time library and sbx.pc for programs that use libsbx."
  DEPENDS libsbx)
sbx_package(conformance_lib libsbx-conformance0 libs "sbx provider conformance suite (library)"
" The lifecycle conformance suite of sbx providers as a library; the sbx
 command runs it as 'sbx conformance'."
  DEPENDS libsbx LDCONFIG)
sbx_package(provider_dev sbx-provider-dev devel "files for writing sbx provider plugins"
" The provider ABI header (sbx/provider.h, which includes sbx/types.h of
 libsbx-dev) and sbx-provider.pc, the
 conformance suite's header, link-time library and sbx-conformance.pc, a
 minimal provider template and the guide to writing a provider. A
 provider links nothing from sbx; its CI runs 'sbx conformance'."
  DEPENDS sbx libsbx_dev conformance_lib)
foreach(name ${SBX_PROVIDERS})
  sbx_package(provider_${name} sbx-provider-${name} admin
    "sbx provider plugin: ${name}"
" The ${name} provider of sbx (${name}.so in the provider directory) and
 its configuration drop-in /etc/sbx/conf.d/${name}.yaml, whose comments
 list every key. See /usr/share/doc/sbx/providers/${name}.md."
    DEPENDS sbx
    CONFFILES ${etc}/conf.d/${name}.yaml)
endforeach()

# Packaged only: the reconciler's unit (not enabled by the package), the
# documentation, and for provider authors the template and their guide.
install(FILES ${CMAKE_SOURCE_DIR}/etc/systemd/sbx-reconcile.service
        DESTINATION /lib/systemd/system COMPONENT sbx EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sbx
        COMPONENT sbx EXCLUDE_FROM_ALL)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sbx
        COMPONENT sbx EXCLUDE_FROM_ALL FILES_MATCHING PATTERN "*.md"
        PATTERN WRITING-A-PROVIDER.md EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/docs/WRITING-A-PROVIDER.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sbx-provider-dev
        COMPONENT provider_dev EXCLUDE_FROM_ALL)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/provider-template
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sbx-provider-dev/examples
        COMPONENT provider_dev EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL sbx libsbx libsbx_dev conformance_lib provider_dev)
foreach(name ${SBX_PROVIDERS})
  list(APPEND CPACK_COMPONENTS_ALL provider_${name})
endforeach()
set(CPACK_PACKAGE_NAME sbx)
# Each package's summary is the first line of its description (above);
# without this CPack would put the project's one in front of it.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${SBX_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SBX_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps must find libsbx and libsbx-conformance in the build tree;
# their packages are the component dependencies above.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${CMAKE_BINARY_DIR}/host ${CMAKE_BINARY_DIR}/conformance)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_OUTPUT_CONFIG_FILE ${CMAKE_BINARY_DIR}/CPackConfig.cmake)
include(CPack)
