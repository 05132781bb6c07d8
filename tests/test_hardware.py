"""CPU facts (``alaya.hardware``): the model name and native bf16 from /proc/cpuinfo."""

import pytest

from alaya.hardware import cpu_info, wants_bf16


def test_cpu_info_reads_the_model_and_native_bf16(tmp_path):
    amd, intel = tmp_path / "amd", tmp_path / "intel"
    amd.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    intel.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.80GHz\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert cpu_info(str(amd)) == ("AMD EPYC 9B14", True)
    assert cpu_info(str(intel)) == ("Intel(R) Xeon(R) Processor @ 2.80GHz", False)
    assert cpu_info(str(tmp_path / "missing")) == ("", None)


def test_wants_bf16_follows_the_choice():
    assert wants_bf16("on") and not wants_bf16("off")
    assert wants_bf16("auto") == bool(cpu_info()[1])
    with pytest.raises(ValueError, match="auto, on or off"):
        wants_bf16("yes")
