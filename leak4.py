import sys, glob, gc
sys.argv = ["x"]
import fuzz_otlp
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
datas = [open(f, "rb").read() for f in sorted(glob.glob("/tmp/fuzz/corpus_otlp/*"))]
for rnd in range(5):
    for d in datas:
        try:
            fuzz_otlp.one(d)
        except Exception as e:
            print("EXC", type(e).__name__, str(e)[:200]); 
    gc.collect()
    print(rnd, len(datas), f"{rss():.0f} MB", flush=True)
