/* wino_pass_harness.c — one Winograd F(2x2) pass (forward or weight gradient) of one shape, timed by the thread's
 * CPU clock, best and mean of REPS calls, with a hash of the result (y or dw) to compare two builds bit for bit.
 * The study's throwaway tool (docs/studies/2026-12-07-fp32-wino.md), kept so that its numbers can be rerun:
 *   cd build/bench && eval gcc -O3 -std=gnu11 -I../../codelets -I../../util -I../../include -I../../graph \
 *       ../../docs/studies/2026-12-07-fp32-wino/wino_pass_harness.c [OBJ] -o /tmp/wprof \
 *       $(cat CMakeFiles/dnn_op_bench.dir/linkLibs.rsp) -lstdc++
 * (OBJ: an object of another conv2d_winograd_f2.c, which then replaces the library's: the A/B of the study).
 *   /tmp/wprof f|w C H K N REPS [EVICT [PAD [W]]]   (EVICT 1: write a 32 MiB buffer between calls: x and dy cold) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "conv2d_winograd.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
 char pass=argv[1][0]; int C=atoi(argv[2]),H=atoi(argv[3]),K=atoi(argv[4]),N=atoi(argv[5]),reps=atoi(argv[6]);
 int pad=argc>8?atoi(argv[8]):1, Wd=argc>9?atoi(argv[9]):H; dnn_wino_shape s={.N=N,.C=C,.H=H,.W=Wd,.K=K,.P=H+2*pad-2,.Q=Wd+2*pad-2,.pad_h=pad,.pad_w=pad};
 size_t nx=(size_t)N*C*H*Wd, ny=(size_t)N*K*s.P*s.Q, nw=(size_t)K*C*9;
 float*x=malloc(nx*4),*y=malloc(ny*4),*w=malloc(nw*4),*dw=calloc(nw,4);
 for(size_t i=0;i<nx;i++)x[i]=(float)rand()/RAND_MAX-0.5f;
 for(size_t i=0;i<ny;i++)y[i]=(float)rand()/RAND_MAX-0.5f;
 for(size_t i=0;i<nw;i++)w[i]=(float)rand()/RAND_MAX-0.5f;
 size_t wk= pass=='w'? dnn_wino_filter_work(&s): dnn_wino_work(&s);
 float*work=aligned_alloc(64,(wk*4+63)/64*64);
 /* a big buffer to evict caches between calls, like a step (activations leave the core's caches) */
 size_t nev=8u<<20; float*ev=calloc(nev,4); int evict=argc>7&&atoi(argv[7]);
 double best=1e9,tot=0;
 for(int r=0;r<reps;r++){ if(evict) for(size_t i=0;i<nev;i+=16) ev[i]+=1.0f;
  double t=now(); if(pass=='w') dnn_wino_backward_filter(dw,x,y,&s,work); else dnn_wino_forward(y,x,w,&s,0.0f,work);
  t=now()-t; tot+=t; if(t<best)best=t;}
 double fl=2.0*N*K*C*9*s.P*s.Q; unsigned long long hsh=1469598103934665603ULL; const unsigned char*pb=(const unsigned char*)(pass=='w'?dw:y); size_t nb=(pass=='w'?nw:ny)*4; for(size_t i=0;i<nb;i++){hsh^=pb[i];hsh*=1099511628211ULL;}
 printf("%c C%d %dx%d K%d N%d: best %.3f ms  mean %.3f ms  %.1f GFLOP/s hash %016llx\n",pass,C,H,H,K,N,best*1e3,tot/reps*1e3,fl/best*1e-9,hsh);
 return 0;}
