/* The studies' Bayesian optimisation suite (tests/unit/bo_suite.c). */
#ifndef BO_SUITE_H
#define BO_SUITE_H
void zt_suite_bo(void);
#endif
