/* The unit suites of libztrain's classes that have no selftest in their
 * own file (tests/unit/lib_suites.c); zt_selftest runs them by name. */
#ifndef ZT_LIB_SUITES_H
#define ZT_LIB_SUITES_H
void zt_suite_error(void);
void zt_suite_half(void);
void zt_suite_log(void);
void zt_suite_refusals(void);
void zt_suite_text(void);
void zt_suite_util(void);
void zt_suite_env(void);
void zt_suite_idx(void);
void zt_suite_bufpool(void);
void zt_suite_cmdline(void);
void zt_suite_placeholder(void);
void zt_suite_server(void);
void zt_suite_process(void);
void zt_suite_job(void);
void zt_suite_fileserver(void);
void zt_suite_replica(void);
void zt_suite_ps_client(void);
void zt_suite_arlayout(void);
void zt_suite_allreduce(void);
void zt_suite_ar_reducers(void);
void zt_suite_collective(void);
#endif
