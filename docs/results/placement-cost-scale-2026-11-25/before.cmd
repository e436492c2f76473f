scx_sisutil placement-cost --topologies 1x8,1x256,8x32,32x8,64x8 --busy 0,90,100 --policies vanilla,patched,unbounded --runs 7 --placements 10000
