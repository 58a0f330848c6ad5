/* unit_allreduce_auto — --allreduce auto's choice (graph/dist.c dnn_allreduce_resolve): the tree
 * when every rank is on one node (or there is one rank), else rhd for a power-of-two number of
 * ranks and the ring for the others; an explicit algorithm is kept as it is. */
#include <stdio.h>
#include <string.h>

#include "dist.h"
#include "test_util.h"

static void expect(dnn_allreduce a, int nranks, int one_node, dnn_allreduce want)
{
	dnn_allreduce got = dnn_allreduce_resolve(a, nranks, one_node);
	TEST_CHECK(got == want, "%s, %d ranks, one node %d: %s, expected %s", dnn_allreduce_name(a), nranks, one_node,
		   dnn_allreduce_name(got), dnn_allreduce_name(want));
}

int main(void)
{
	for (int n = 1; n <= 64; n++) /* one node (mpirun here, or the namespace-less runs): the tree */
		expect(DNN_ALLREDUCE_AUTO, n, 1, DNN_ALLREDUCE_TREE);
	expect(DNN_ALLREDUCE_AUTO, 1, 0, DNN_ALLREDUCE_TREE);
	const int pow2[] = {2, 4, 8, 16, 32, 64, 1024};
	for (size_t i = 0; i < sizeof(pow2) / sizeof(pow2[0]); i++)
		expect(DNN_ALLREDUCE_AUTO, pow2[i], 0, DNN_ALLREDUCE_RHD);
	const int other[] = {3, 5, 6, 7, 12, 24, 1000};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		expect(DNN_ALLREDUCE_AUTO, other[i], 0, DNN_ALLREDUCE_RING);
	const dnn_allreduce fixed[] = {DNN_ALLREDUCE_TREE, DNN_ALLREDUCE_RING, DNN_ALLREDUCE_RHD, DNN_ALLREDUCE_PS};
	for (int i = 0; i < 4; i++)
		for (int one = 0; one <= 1; one++) {
			expect(fixed[i], 4, one, fixed[i]);
			expect(fixed[i], 16, one, fixed[i]);
		}
	TEST_CHECK(!strcmp(dnn_allreduce_name(DNN_ALLREDUCE_AUTO), "auto"), "name of auto: %s",
		   dnn_allreduce_name(DNN_ALLREDUCE_AUTO));
	TEST_CHECK(!strcmp(dnn_allreduce_name(DNN_ALLREDUCE_PS), "ps"), "name of ps: %s", dnn_allreduce_name(DNN_ALLREDUCE_PS));
	return test_report("unit_allreduce_auto");
}
