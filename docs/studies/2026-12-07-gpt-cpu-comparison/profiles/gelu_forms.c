/* The GELU forward in two forms, timed (study 2026-12-07-gpt-cpu-comparison): libm tanhf as codelets/gelu.c,
 * and x / (1 + exp(-2u)). gcc -O3 -march=native gelu_forms.c -lm [-ffast-math: both vectorised by libmvec] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define B 0.7978845608028654f
#define K 0.044715f
__attribute__((noinline)) void g_tanh(float *restrict y,const float *restrict x,long n){for(long i=0;i<n;i++){float u=B*(x[i]+K*(x[i]*x[i]*x[i]));y[i]=0.5f*x[i]*(1.0f+tanhf(u));}}
__attribute__((noinline)) void g_exp(float *restrict y,const float *restrict x,long n){for(long i=0;i<n;i++){float u=B*(x[i]+K*(x[i]*x[i]*x[i]));y[i]=x[i]/(1.0f+expf(-2.0f*u));}}
int main(){long n=1<<20;float*x=malloc(n*4),*y=malloc(n*4),*z=malloc(n*4);for(long i=0;i<n;i++)x[i]=(float)((i*2654435761u)%10000)/1000.0f-5.0f;
double best[2]={1e9,1e9};for(int r=0;r<5;r++){double t=now();g_tanh(y,x,n);t=now()-t;if(t<best[0])best[0]=t;t=now();g_exp(z,x,n);t=now()-t;if(t<best[1])best[1]=t;}
double md=0;for(long i=0;i<n;i++){double d=fabs(y[i]-z[i])/fmax(1,fabs(y[i]));if(d>md)md=d;}
printf("tanhf form: %.2f ns/elem; expf (sigmoid) form: %.2f ns/elem; max diff %.2g\n",best[0]/n*1e9,best[1]/n*1e9,md);}
