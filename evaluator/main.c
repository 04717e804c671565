/* ztrain-evaluator: thin main; the role's logic lives in libztrain/evaluator. */
#include "zt_role.h"

int main(int argc, char **argv)
{
    static const zt_role_info_t info = {
        "ztrain-evaluator", "evaluator",
        "Evaluator replica: scores checkpoints (the evaluation logic arrives with issue 3)." };
    return zt_role_main(&info, argc, argv);
}
