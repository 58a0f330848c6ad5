# simulated / measured images/s against the ranks per core of the measured runs
# (docs/SIMULATION.md "Ranks per core"); gnuplot docs/sim/net-validation-cores-2026-12-06.gp
set terminal pngcairo size 760,520 font 'DejaVu Sans,10'
set output 'docs/sim/net-validation-cores-2026-12-06.png'
set datafile separator ','
set logscale y
set yrange [0.5:4]
set xrange [0.5:4.5]
set xtics ("1\n(2 hosts, 2 cores)" 1, "2\n(2 hosts, 1 core)" 2, "2\n(4 hosts, 2 cores)" 3, "4\n(4 hosts, 1 core)" 4)
set ytics (0.5, 0.8, 1, 1.2, 1.5, 2, 3, 4)
set grid ytics
set key top left
set bmargin 6
set xlabel "ranks per core of the measured run (3 threads per rank)" offset 0,-1.2
set ylabel 'simulated / measured images/s'
set title "lenet5 / resnet8 training, 100 Mbit/s and 1 Gbit/s, sync and async, 2 rounds\nsame cases and model; only the cores given to the namespace hosts (taskset) change"
x(h,c) = (h == 2 ? (c == 2 ? 1 : 2) : (c == 2 ? 3 : 4))
plot 1.2 with lines dt 2 lc 'grey' title '±20%', 0.8 with lines dt 2 lc 'grey' notitle, 1 with lines lc 'black' notitle, \
  '< grep ",lenet5," docs/sim/net-validation-cores-2026-12-06.csv' using (x($3,$6) - 0.08 + (strcol(8) eq "b" ? 0.04 : 0)):12 with points pt 7 ps 1.1 lc 1 title 'lenet5', \
  '< grep ",resnet8," docs/sim/net-validation-cores-2026-12-06.csv' using (x($3,$6) + 0.08 + (strcol(8) eq "b" ? 0.04 : 0)):12 with points pt 5 ps 1.1 lc 2 title 'resnet8'
