# dimoc track --fod --tdi mapped on the GPU (dm_fodtrack_tdi_kernel): still tckmap -template
# voxel for voxel on the tracker's .tck, --tdi-exact still the exact walk.
cd "$(dirname "$0")/../py" && DIMOC_TRACK_DEVICE=gpu exec "$PYTHON" test_track_tdi_mrtrix.py
