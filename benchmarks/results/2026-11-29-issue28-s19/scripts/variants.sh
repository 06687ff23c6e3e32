# Sourced: apply diagnostic variant $1 to the template $T (results wrong on purpose). Line numbers of wgmma_core.cu.j2
# at 2f0a73d: 894 the full barrier's expected bytes, 900/915 the A and B TMA loads, 709 the promotion's chunk loop,
# 713-716 its FFMAs.
#   kernel: as it is; noload: no A/B TMA loads (the stage's full barrier waits for the A scales only; the wgmmas read
#   whatever the stage holds); nomma: the FFMAs read acc, so ptxas drops the K loop's wgmmas; nopromo: one chunk of
#   the promotion (4 FFMAs a K block; the wgmmas stay); noload+nomma.
variant() {
  case "$1" in
    *noload*) sed -i '894s/STAGE_BYTES + scale_bytes/scale_bytes/; 900s/^\( *\)tma_load_2d(/\1if (0) tma_load_2d(/; 915s/^\( *\)tma_load_2d(/\1if (0) tma_load_2d(/' $T ;;
  esac
  case "$1" in
    *nomma*) sed -i '713,716s/fmaf(t\[ms\]\[/fmaf(acc[ms][/' $T ;;
    *nopromo*) sed -i '709s/j < NR \/ 4/j < 1/' $T ;;
  esac
}
