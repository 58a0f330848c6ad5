set terminal pngcairo size 760,600 font 'DejaVu Sans,10'
set output 'docs/sim/net-validation-2026-12-06.png'
set datafile separator ','
set logscale xy
set xrange [300:30000]; set yrange [300:30000]
set grid
set key top left
set xlabel 'measured images/s (namespace hosts)'
set ylabel 'simulated images/s (netns platform)'
set title "lenet5 / resnet8, 2 and 4 hosts, 100 Mbit/s and 1 Gbit/s, sync and async\n2026-12-06: idle workers sleep, 8 KiB bucket at 100 Mbit/s, latency 50 us (not fitted to these runs)"
plot x with lines lc 'black' title 'simulated = measured', 1.2*x with lines dt 2 lc 'grey' title '±20%', 0.8*x with lines dt 2 lc 'grey' notitle, \
  '< grep ":2:" docs/sim/net-validation-2026-12-06.csv' using 6:8 with points pt 7 ps 1.2 lc 1 title '2 hosts', \
  '< grep ":4:" docs/sim/net-validation-2026-12-06.csv' using 6:8 with points pt 5 ps 1.2 lc 2 title '4 hosts'
