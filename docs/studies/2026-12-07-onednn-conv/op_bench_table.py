import sys,collections
rows=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith('| conv2d'):
        f=[x.strip() for x in l.split('|')]
        rows[(f[2],f[3])].append(float(f[4]))
shapes=[]
for (s,p) in rows:
    if s not in shapes: shapes.append(s)
print("| shape | pass | ours fp32 | ours bf16 | oneDNN conv bf16 | ours bf16 / oneDNN (per round) |\n|---|---|---|---|---|---|")
for s in shapes:
    for ps in ['fwd','bwd_data','bwd_filter']:
        a32=min(rows[(s,ps+' auto')]); a16=min(rows[(s,ps+' auto bf16')]); o=min(rows[(s,ps+' onednn bf16')])
        r=[ '%.2f'%(x/y) for x,y in zip(rows[(s,ps+' auto bf16')],rows[(s,ps+' onednn bf16')])]
        print(f"| {s} | {ps} | {a32:.3f} | {a16:.3f} | {o:.3f} | {a16/o:.2f} ({', '.join(r)}) |")
