/* ztrain: the public API a training program includes. */
#ifndef ZTRAIN_H
#define ZTRAIN_H
#include "zt_error.h"
#include "zt_log.h"
#include "zt_knobs.h"
#include "zt_replica.h"
#endif
