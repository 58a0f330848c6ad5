# plot.gp — simulated against published single-GPU ResNet-50 training images/s (result.csv of
# sim/fit_gpu.py): `gnuplot plot.gp` in this folder writes sim-vs-published.png: the error of
# each figure (simulated / published - 1), fit figures filled, held-out ones open, the +/-10% band.
set terminal pngcairo size 1000,650 font ",11"
set output "sim-vs-published.png"
set datafile separator ","
set yrange [-20:20]
set xrange [-0.7:17.7]
set ylabel "simulated / published - 1 (%)"
set title "ResNet-50 training on one GPU: the fitted roofline against published figures\n(filled: the fit's figure; open: held out; dashed: +/-10%)"
set xtics rotate by -40 font ",9" nomirror
set grid ytics
set key right top
set bmargin 9
plot 10 w l lc rgb "gray40" dt 2 notitle, -10 w l lc rgb "gray40" dt 2 notitle, 0 w l lc rgb "black" notitle, \
     "result.csv" every ::1 u 0:(stringcolumn(4) eq "fit" ? $12 : 1/0):xtic(1) w p pt 7 ps 1.8 lc rgb "#1f77b4" t "fit", \
     "result.csv" every ::1 u 0:(stringcolumn(4) eq "holdout" ? $12 : 1/0) w p pt 6 ps 1.8 lw 2 lc rgb "#d62728" t "held out"
