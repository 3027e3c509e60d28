// What an atomic increment costs on this VM (docs/benchmarks.md, "Two more levers looked at,
// neither kept"): uncontended, on random lines of 64 MiB, and on a line another thread keeps
// writing (the extra over the same loop without the other thread).
//   gcc -O2 -pthread atomic.c -o /tmp/atomic && /tmp/atomic
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
#include <pthread.h>
#include <stdlib.h>
static _Atomic long c; static _Atomic long *arr;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
volatile int stop=0;
void* other(void*x){ while(!stop){ atomic_fetch_add(&c,1); for(volatile int i=0;i<2000;i++); } return 0;}
int main(){ long N=50000000; double t=now(); for(long i=0;i<N;i++) atomic_fetch_add(&c,1); printf("uncontended %.1f ns\n",(now()-t)/N*1e9);
 // strided over 64MiB: cache misses
 long M=1<<23; arr=calloc(M,8); t=now(); long s=0; for(long i=0;i<10000000;i++){ s+=atomic_fetch_add(&arr[(i*2654435761u)%M],1);} printf("random 64MiB %.1f ns\n",(now()-t)/1e7*1e9);
 pthread_t th; pthread_create(&th,0,other,0); t=now(); for(long i=0;i<N/10;i++){ atomic_fetch_add(&c,1); for(volatile int j=0;j<200;j++);} double a=(now()-t)/(N/10)*1e9; stop=1; pthread_join(th,0);
 stop=0; t=now(); for(long i=0;i<N/10;i++){ for(volatile int j=0;j<200;j++);} double b=(now()-t)/(N/10)*1e9; printf("with remote writer every ~2000 spins: %.1f ns extra per op\n",a-b);}
