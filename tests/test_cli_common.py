"""The evaluation summary the commands print."""

from alaya.cli_common import print_metrics


def test_print_metrics_prints_the_keys_it_has_in_order(capsys):
    print_metrics({"ssim": 0.81234, "psnr": 25.0, "fps": None, "rows": []}, ("psnr", "missing", "ssim", "fps"),
                  width=6)
    assert capsys.readouterr().out.splitlines() == ["psnr   25.0000", "ssim   0.8123", "fps    -"]
