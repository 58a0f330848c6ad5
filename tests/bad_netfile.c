/* bad_netfile — the net parser rejects every kind of bad network file with one line
 * "file:line: message" (or "file: message" for whole-file problems), never a crash. */
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "test_util.h"

typedef struct {
	const char *text;
	const char *want; /* substring the error must contain, including the location */
} bad_case;

static const bad_case cases[] = {
	{"", "t.net: empty network"},
	{"# only a comment\n\n", "t.net: empty network"},
	{"input x 1 28 28\nfrob y x\nsoftmax_xent l y\n", "t.net:2: unknown op 'frob'"},
	{"input x 1 28 28\nconv c x out=6 k=5 wat=3\n", "t.net:2: unknown key 'wat'"},
	{"input x 1 28 28\nconv c x k=5\n", "t.net:2: c: conv needs out=N"},
	{"input x 1 28 28\nconv c x out=6\n", "t.net:2: c: conv needs k=N"},
	{"input x 1 28 28\nconv\n", "t.net:2: conv: missing node name"},
	{"input x 1 28 28\nrelu r\n", "t.net:2: relu r: missing input"},
	{"input x 1 28 28\nrelu r out=3\n", "t.net:2: relu r: missing input"},
	{"input x 1 28 28\nrelu r nowhere\nsoftmax_xent l r\n", "t.net:2: r: unknown input 'nowhere'"},
	{"input x 1 28 28\nrelu x x\n", "t.net:2: duplicate name 'x'"},
	{"input x 1 28 28\ndense a b out=10\ndense b a out=10\nsoftmax_xent l b\n", "cycle"},
	{"input x 1 28 28\nrelu r r\n", "t.net:2: r: a node cannot be its own input"},
	{"input x 1 28\n", "t.net:1: input needs a shape"},
	{"input x 0 28 28\n", "t.net:1: input shape"},
	{"input x -1 28 28\n", "t.net:1: input shape"},
	{"input x 1 28 abc\n", "t.net:1: input shape"},
	{"input x 1 99999999999999999999 28\n", "t.net:1: input shape"},
	{"input x 4096 16384 16384\n", "t.net:1: input 4096x16384x16384 is absurdly large"},
	/* sequences (graph.h: seq) */
	{"input x tokens\n", "t.net:1: input x tokens T: T must be an integer"},
	{"input x tokens 0\n", "t.net:1: input x tokens T: T must be an integer"},
	{"input x tokens 8 3\n", "t.net:1: input x tokens T: T must be an integer"},
	{"input x seq 8\n", "t.net:1: input x seq T C: T must be an integer"},
	{"input x seq 8 0\n", "t.net:1: input x seq T C: T must be an integer"},
	{"input x seq 8 16\nconv c x out=4 k=3\nsoftmax_xent l c\n", "t.net:2: c: conv takes images (C H W), but x is a sequence"},
	{"input x seq 8 16\nmaxpool p x k=2\nsoftmax_xent l p\n", "t.net:2: p: maxpool takes images"},
	{"input x seq 8 16\nbatchnorm b x\nsoftmax_xent l b\n", "t.net:2: b: batchnorm takes images"},
	{"input x seq 16 8\ndense d x out=16\nrelu r x\nadd a d,r\nsoftmax_xent l a\n", "t.net:4: a: inputs have different shapes"},
	{"input x seq 8 16\ndense d x out=1\nsoftmax_xent l d\n", "t.net:3: l: the loss needs at least 2 classes (a vocabulary)"},
	/* embed, lm_head */
	{"input x seq 4 8\nembed e x vocab=5 dim=8\nlm_head o e,e\nsoftmax_xent l o\n",
	 "t.net:2: e: embed reads token ids: its input must be the net's `input NAME tokens T` line, but x is an input of floats"},
	{"input x tokens 4\ndense d x out=8\nembed e d vocab=5 dim=8\nlm_head o e,e\nsoftmax_xent l o\n",
	 "t.net:3: e: embed reads token ids: its input must be the net's `input NAME tokens T` line, but d is dense"},
	{"input x tokens 4\nembed e x dim=8\nlm_head o e,e\nsoftmax_xent l o\n", "t.net:2: e: embed needs vocab=V and dim=C"},
	{"input x tokens 4\nembed e x vocab=5\nlm_head o e,e\nsoftmax_xent l o\n", "t.net:2: e: embed needs vocab=V and dim=C"},
	{"input x tokens 4\nembed e x vocab=16777217 dim=8\nlm_head o e,e\nsoftmax_xent l o\n", "t.net:2: e: vocab=16777217 is not an integer in [1, 16777216]"},
	{"input x tokens 4\nembed e x vocab=70000 dim=65536\nlm_head o e,e\nsoftmax_xent l o\n",
	 "t.net:2: e: its table wte of vocab 70000 x dim 65536 = 4587520000 floats is more than 2147483647"},
	{"input x tokens 4\nembed e x vocab=5 dim=8\ndense d e out=8\nlm_head o e,d\nsoftmax_xent l o\n",
	 "t.net:4: o: lm_head's second input must be an embed node (its table is the output layer's weight), but d is dense"},
	{"input x tokens 4\nembed e x vocab=5 dim=8\ndense d e out=6\nlm_head o d,e\nsoftmax_xent l o\n",
	 "t.net:4: o: d has 6 channels, but the embed e has dim=8"},
	{"input x 1 4 4\ndense d x out=8\nlm_head o d,d\nsoftmax_xent l o\n",
	 "t.net:3: o: lm_head needs a sequence [T][C] as its first input, but d is 8x1x1"},
	{"input x tokens 4\nembed e x vocab=5 dim=8\nlm_head o e\nsoftmax_xent l o\n", "t.net:3: o: op lm_head takes two inputs, got 1"},
	{"input x tokens 4\nembed e x vocab=5 dim=8\nlm_head o e,e,e\nsoftmax_xent l o\n", "t.net:3: o: op lm_head takes two inputs, got 3"},
	{"input x 1 28 28\nconv c x out=0 k=3\n", "t.net:2: c: out=0 is not an integer"},
	{"input x 1 28 28\nconv c x out=-4 k=3\n", "t.net:2: c: out=-4"},
	{"input x 1 28 28\nconv c x out=4.5 k=3\n", "t.net:2: c: out=4.5"},
	{"input x 1 28 28\nconv c x out=4 k=3 stride=0\n", "t.net:2: c: stride=0"},
	{"input x 1 28 28\nconv c x out=4 k=3 bias=2\n", "t.net:2: c: bias=2"},
	{"input x 1 28 28\nconv c x out=999999999 k=3\n", "t.net:2: c: out=999999999"},
	{"input x 1 28 28\nconv c x out=4 k=29\nrelu r c\ndense f r out=10\nsoftmax_xent l f\n",
	 "t.net:2: c: kernel 29 (dilation 1) does not fit"},
	{"input x 1 28 28\nconv c x out=4 k=3 pad=5\nrelu r c\ndense f r out=10\nsoftmax_xent l f\n",
	 "t.net:2: c: pad=5 must be smaller"},
	{"input x 1 28 28\nmaxpool p x k=2 pad=2\ndense f p out=10\nsoftmax_xent l f\n", "t.net:2: p: pad=2 must be at most half"},
	{"input x 1 4 4\nmaxpool p x k=8\ndense f p out=10\nsoftmax_xent l f\n", "t.net:2: p: window 8 does not fit"},
	{"input x 1 28 28\nconv a x out=4 k=3\nconv b x out=5 k=3\nadd s a,b\ndense f s out=10\nsoftmax_xent l f\n",
	 "t.net:4: s: inputs have different shapes"},
	{"input x 1 28 28\nadd s x\n", "t.net:2: s: op add takes two or more inputs, got 1"},
	{"input x 1 28 28\nrelu r x,x\n", "t.net:2: r: op relu takes one input, got 2"},
	{"input x 1 28 28\nconv c x out=4 k=3\nsoftmax_xent l c\n", "t.net:3: l: the loss needs a flat input"},
	{"input x 1 28 28\ndense f x out=1\nsoftmax_xent l f\n", "t.net:3: l: the loss needs at least 2 classes"},
	{"input x 1 28 28\ndense f x out=10\n", "t.net: no loss node"},
	{"dense f x out=10\nsoftmax_xent l f\n", "t.net:1: f: unknown input 'x'"},
	{"input x 1 28 28\ninput y 1 28 28\n", "t.net:2: a net has exactly one input line"},
	{"input x 1 28 28\ndense f x out=10\nsoftmax_xent l f\nsoftmax_xent m f\n", "t.net:4: a net has exactly one loss"},
	{"input x 1 28 28\ndense f x out=10\ndense g x out=10\nsoftmax_xent l f\n", "output is never used"},
	{"input x 1 28 28\ndense f x out=10\nsoftmax_xent l f\nrelu after f\n", "output is never used"},
	{"input x 1 28 28\nbatchnorm b x\ndense f b out=10\nsoftmax_xent l f\n", "t.net:2: b: batchnorm directly on the input"},
	{"input x 1 28 28\nconv c x out=4 k=3\nbatchnorm b c eps=0\ndense f b out=10\nsoftmax_xent l f\n", "t.net:3: b: eps=0"},
	{"input x 1 28 28\nconv c x out=4 k=3\nbatchnorm b c momentum=2\ndense f b out=10\nsoftmax_xent l f\n", "t.net:3: b: momentum=2"},
	{"input x 1 28 28\nrelu bad/name x\n", "t.net:2: invalid name 'bad/name'"},
	{"input x 1 28 28\nconv c x out=4 k=3 out\n", "t.net:2: expected key=value"},
	{"input x 1 28 28\nrelu r x\x01\n", "t.net:2: binary or non-ASCII character (0x01)"},
	{"input x 1 28 28\ndense f x out=10\nsoftmax_xent l f\ndense g x out=3\n", "output is never used"},
};

int main(void)
{
	char err[1024];
	dnn_graph g;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(err, 0, sizeof(err));
		int rc = dnn_graph_parse(&g, cases[i].text, "t.net", err, sizeof(err));
		if (rc == 0) {
			TEST_CHECK(0, "case %zu accepted: %s", i, cases[i].text);
			dnn_graph_free(&g);
			continue;
		}
		printf("case %2zu: %s\n", i, err);
		TEST_CHECK(strstr(err, cases[i].want) != NULL, "case %zu: error '%s' lacks '%s'", i, err, cases[i].want);
		TEST_CHECK(strchr(err, '\n') == NULL, "case %zu: error is not one line", i);
	}
	/* A very long line and a huge file of nodes. */
	static char big[200000];
	memset(big, 'a', sizeof(big) - 1);
	TEST_CHECK(dnn_graph_parse(&g, big, "t.net", err, sizeof(err)) != 0 && strstr(err, "t.net:1: line longer"),
		   "long line: %s", err);
	/* Loading: missing file, directory, binary file. */
	TEST_CHECK(dnn_graph_load(&g, "/nonexistent/x.net", err, sizeof(err)) != 0 && strstr(err, "/nonexistent/x.net"),
		   "missing file: %s", err);
	TEST_CHECK(dnn_graph_load(&g, "/tmp", err, sizeof(err)) != 0 && strstr(err, "is a directory"), "dir: %s", err);
	return test_report("bad_netfile");
}
