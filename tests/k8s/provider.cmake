# The k8s provider (plugins/k8s) against the fake cluster: the conformance
# suite, and the provider's own cases with faults. Included from
# CMakeLists.txt; kept apart from the fakes' own tests.
set(K8S_STACK ${CMAKE_CURRENT_LIST_DIR}/k8s_stack.c)
sbx_add_test(test_k8s_conformance ${CMAKE_CURRENT_LIST_DIR}/test_k8s_conformance.c
  ${K8S_STACK} ${CMAKE_SOURCE_DIR}/tests/conformance/suite_runner.c
  LIBS sbx_conformance PkgConfig::CURL PkgConfig::JSONC ${CMAKE_DL_LIBS})
add_dependencies(test_k8s_conformance sbx_provider_k8s)
set_tests_properties(test_k8s_conformance PROPERTIES TIMEOUT 900)

sbx_add_test(test_k8s_provider ${CMAKE_CURRENT_LIST_DIR}/test_k8s_provider.c ${K8S_STACK} ${SBX_PROVIDER_HARNESS}
  LIBS sbx PkgConfig::CURL PkgConfig::JSONC)
add_dependencies(test_k8s_provider sbx_provider_k8s)
