set terminal pngcairo size 760,600 font 'DejaVu Sans,10'
set output 'docs/sim/net-validation.png'
set datafile separator ','
set logscale xy
set xrange [150:3000]; set yrange [150:3000]
set grid
set key top left
set xlabel 'measured images/s (namespace hosts)'
set ylabel 'simulated images/s (netns platform)'
set title 'lenet5 / resnet8, 2 and 4 hosts, 100 Mbit/s and 1 Gbit/s, sync and async'
plot x with lines lc 'black' title 'simulated = measured', 1.2*x with lines dt 2 lc 'grey' title '±20%', 0.8*x with lines dt 2 lc 'grey' notitle, \
  'docs/sim/net-validation.csv' every ::1 using 6:8 with points pt 7 ps 1.2 lc 1 title 'latency 2.2 ms (from the microbenchmark)', \
  'docs/sim/net-validation-lat1200.csv' every ::1 using 6:8 with points pt 5 ps 1.0 lc 2 title 'latency 1.2 ms (fitted to these runs)'
