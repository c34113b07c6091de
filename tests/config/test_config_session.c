/*
 * test_config_session.c - the `session` section: session.ports, the TCP
 * ports every session of this configuration declares unless its spec
 * says otherwise; every malformed value refused with file:line.
 */
#include "config_fixture.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

TestSuite(config_session, .init = cfg_dir_setup, .fini = cfg_dir_teardown);

Test(config_session, ports_are_read_in_order)
{
    cfg_write("sbx.yaml", "session:\n  ports: [8080, 3000, 65535, 1]\n");
    struct sbx_config *cfg;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nsession_ports, 4);
    cr_expect_eq(cfg->session_ports[0], 8080);
    cr_expect_eq(cfg->session_ports[1], 3000);
    cr_expect_eq(cfg->session_ports[2], 65535);
    cr_expect_eq(cfg->session_ports[3], 1);
    sbxh_config_free(cfg);
    /* block style, and a drop-in may set it when sbx.yaml does not */
    cfg_write("sbx.yaml", "default_provider: local\n");
    cfg_write("conf.d/ports.yaml", "session:\n  ports:\n    - 9000\n");
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nsession_ports, 1);
    cr_expect_eq(cfg->session_ports[0], 9000);
    sbxh_config_free(cfg);
}

Test(config_session, empty_or_absent_is_no_ports)
{
    const char *texts[] = {"session:\n", "session: {}\n", "session:\n  ports: []\n",
                           "default_provider: local\n"};
    for (size_t i = 0; i < 4; i++) {
        cfg_write("sbx.yaml", texts[i]);
        struct sbx_config *cfg;
        sbx_error err;
        cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s: %s", texts[i], err.message);
        cr_expect_eq(cfg->nsession_ports, 0, "%s", texts[i]);
        sbxh_config_free(cfg);
    }
}

Test(config_session, bad_ports_name_file_and_line)
{
    const char *msg;
    char want[512];
    msg = cfg_expect_error("session:\n  ports: [8080, 0]\n");
    snprintf(want, sizeof want,
             "%s:2: session.ports: \"0\" is not a TCP port (1 to 65535)", cfg_path("sbx.yaml"));
    cr_expect_str_eq(msg, want);
    msg = cfg_expect_error("session:\n  ports:\n    - 80\n    - 65536\n");
    cr_expect(strstr(msg, "sbx.yaml:4: session.ports: \"65536\" is not a TCP port"), "%s",
              msg);
    msg = cfg_expect_error("session:\n  ports: [http]\n");
    cr_expect(strstr(msg, "\"http\" is not a TCP port"), "%s", msg);
    msg = cfg_expect_error("session:\n  ports: [-1]\n");
    cr_expect(strstr(msg, "\"-1\" is not a TCP port"), "%s", msg);
    msg = cfg_expect_error("session:\n  ports: [8080, 9000,\n    8080]\n");
    cr_expect(strstr(msg, "sbx.yaml:3: session.ports: port 8080 is listed twice"), "%s",
              msg);
    msg = cfg_expect_error("session:\n  ports: 8080\n");
    cr_expect(strstr(msg, "sbx.yaml:2: session.ports: expected a list of TCP ports"), "%s",
              msg);
    msg = cfg_expect_error("session:\n  port: [8080]\n");
    cr_expect(strstr(msg, "sbx.yaml:2: session.port: unknown key (expected ports)"), "%s",
              msg);
    msg = cfg_expect_error("session: [8080]\n");
    cr_expect(strstr(msg, "sbx.yaml:1: session"), "%s", msg);
    char many[1024] = "session:\n  ports: [";
    for (int i = 0; i < 65; i++) {
        size_t l = strlen(many);
        snprintf(many + l, sizeof many - l, "%s%d", i ? ", " : "", 10000 + i);
    }
    strcat(many, "]\n");
    msg = cfg_expect_error(many);
    cr_expect(strstr(msg, "sbx.yaml:1: session.ports: 65 ports, at most 64"), "%s", msg);
    /* set twice across files */
    cfg_write("sbx.yaml", "session:\n  ports: [1]\n");
    cfg_write("conf.d/ports.yaml", "session:\n  ports: [2]\n");
    struct sbx_config *cfg;
    sbx_error err;
    cr_expect_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "ports.yaml:1: session: set twice (first set at "), "%s",
              err.message);
}
