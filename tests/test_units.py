import json
import pint
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor import GPU, Cluster, InputError, Training
from advisor.inputs.units import UREG, to_bytes, to_bytes_per_second, to_count, to_flops_per_second, to_tokens


def test_information_is_a_dimension_not_a_number():
    # pint's default registry defines bit = [] so "80 GiB + 3" would succeed; ours must refuse.
    with pytest.raises(pint.errors.DimensionalityError):
        UREG.Quantity("80 GiB") + 3


@pytest.mark.parametrize("text, expected", [
    ("80 GiB", 80 * 2**30), ("80GiB", 80 * 2**30), ("80GB", 80 * 10**9), ("80 GB", 80 * 10**9),
    ("141 GB", 141 * 10**9), ("1.5 TiB", int(1.5 * 2**40)), (85899345920, 85899345920),
])
def test_memory(text, expected):
    assert to_bytes(text, "memory") == expected


def test_bandwidth_bits_and_bytes_agree():
    assert to_bytes_per_second("400 Gbit/s", "bw") == to_bytes_per_second("50 GB/s", "bw") == 50e9
    assert to_bytes_per_second("400 Gbps", "bw") == 50e9


def test_compute_rate_spellings():
    assert to_flops_per_second("989 TFLOP/s", "f") == to_flops_per_second("989 TFLOPS", "f") == 989e12


@pytest.mark.parametrize("text, expected", [("8k", 8192), ("128k", 131072), ("4096", 4096), (2048, 2048), ("1M", 2**20)])
def test_tokens(text, expected):
    assert to_tokens(text, "seq_len") == expected


@pytest.mark.parametrize("text, expected", [("70B", 70 * 10**9), ("1.5e9", 1_500_000_000), ("46.7B", 46_700_000_000),
                                            (7_000_000_000, 7_000_000_000), ("175e9", 175 * 10**9)])
def test_counts(text, expected):
    assert to_count(text, "params") == expected


@pytest.mark.parametrize("bad", ["80 GHz", "80", "80 s", "abc", "-80 GiB", "nan GiB", "inf GiB", True, None, [80]])
def test_memory_rejects_wrong_units_and_values(bad):
    with pytest.raises(InputError) as err:
        to_bytes(bad, "GPU.memory")
    assert "GPU.memory" in str(err.value) and "want" in str(err.value)


def test_wrong_unit_names_the_field_through_the_model():
    with pytest.raises(ValueError) as err:
        GPU(memory="80 GHz", peak_flops="989 TFLOP/s", nvlink_bandwidth="900 GB/s")
    assert "memory" in str(err.value) and "GHz" in str(err.value)


def test_plain_bytes_too_small_for_a_gpu_is_refused_not_clamped():
    with pytest.raises(ValueError, match="at least 1 GiB"):
        GPU(memory=80, peak_flops="989 TFLOP/s", nvlink_bandwidth="900 GB/s")


@pytest.mark.parametrize("bad", ["8.3k", "0", "-1", "8 kb", 0, 1.5, float("nan")])
def test_tokens_reject(bad):
    with pytest.raises(InputError):
        to_tokens(bad, "seq_len")


def test_unit_equivalent_inputs_build_equal_objects():
    a = Cluster(gpu=GPU(memory="80 GiB", peak_flops="989 TFLOP/s", nvlink_bandwidth="900 GB/s"), gpus=16)
    b = Cluster(gpu=GPU(memory=80 * 2**30, peak_flops=989e12, nvlink_bandwidth=900e9), gpus=16)
    assert a == b
    assert Training(seq_len="8k") == Training(seq_len=8192)


@settings(max_examples=300, deadline=None)
@given(st.decimals(min_value=0, max_value=10**6, places=4, allow_nan=False, allow_infinity=False),
       st.sampled_from(["", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi"]),
       st.sampled_from([("B", "", "bytes"), ("bit", "", "bytes"), ("B", "/s", "bytes_per_s"),
                        ("bit", "/s", "bytes_per_s"), ("FLOP", "/s", "flops")]),
       st.sampled_from(["", " "]))
def test_simple_forms_read_without_pint_equal_pint_to_the_last_bit(number, prefix, unit, space):
    """units._simple reads "80 GiB", "400 Gbit/s", "989 TFLOP/s" without pint (pint's import is most of
    a cold recommendation); it must agree with the registry exactly."""
    from advisor.inputs import units

    text = f"{number}{space}{prefix}{unit[0]}{unit[1]}"
    reference = unit[2]
    pint_value = float(units.registry().Quantity(text).to(units._REGISTRY[reference].units).magnitude)
    assert units._simple(text, reference) == pint_value


def test_other_forms_and_other_kinds_still_go_to_pint():
    from advisor.inputs import units

    assert units._simple("80 gigabyte", "bytes") is None          # spelled out: pint
    assert units._simple("1e3 GB", "bytes") is None               # exponent: pint
    assert units._simple("80 GiB", "bytes_per_s") is None         # wrong kind: pint words the error
    with pytest.raises(ValueError, match="not a unit of this kind"):
        to_bytes_per_second("80 GiB", "GPU.nvlink_bandwidth")
    assert to_bytes("80 gigabyte", "f") == to_bytes("80GB", "f") == 80 * 10**9


@pytest.mark.parametrize("text", ["80 GiB * 2", "40 GiB + 40 GiB", "160 GiB / 2", "(80 GiB)", "9^9^9 GiB", "2**40 B"])
def test_a_quantity_is_one_number_and_a_unit_not_arithmetic(text):
    # pint would evaluate these ("80 GiB * 2" as 160 GiB): a typo or a paste error becomes a silent value
    with pytest.raises(InputError, match="no arithmetic"):
        to_bytes(text, "GPU.memory")


@pytest.mark.parametrize("text, want", [("400 Gbit/s", 50e9), ("50 GB/s", 50e9), ("1e+11 B/s", 1e11)])
def test_rates_divide_by_a_unit_and_exponents_keep_their_sign(text, want):
    assert to_bytes_per_second(text, "Cluster.inter_node_bandwidth") == want


# ---- issue 36: one unit grammar, short forms, the vendor's GB for a GPU's memory

@pytest.mark.parametrize("text", ["80G", "80GB", "80 GB", "80 GiB", "80GiB", 80 * 2**30])
def test_gpu_memory_reads_the_vendors_gb_as_gib_as_the_presets_do(text):
    from advisor.inputs import presets

    assert GPU(memory=text, peak_flops="989 TF").memory == 80 * 2**30
    assert GPU(**presets.gpu("H100-SXM-80GB")).memory == 80 * 2**30


def test_other_byte_fields_keep_gb_decimal():
    assert to_bytes("80G", "m") == to_bytes("80GB", "m") == 80 * 10**9
    assert to_bytes_per_second("900 GB/s", "bw") == 900e9


@pytest.mark.parametrize("text", ["989 TF", "989TF", "989 TFLOP/s", "989 TFLOPS", "989 TFLOP", "0.989 PF"])
def test_compute_rate_short_forms(text):
    assert to_flops_per_second(text, "f") == pytest.approx(989e12, rel=1e-12)


def test_the_cli_echoes_how_it_read_the_vendors_gb(capsys):
    from advisor.cli import main

    code = main(["recommend", "--model", "llama-3-8b", "--gpu", "H100-SXM-80GB", "--gpus", "8",
                 "--gpu-memory", "80GB", "--gpu-flops", "989 TF", "--width", "100"])
    out = capsys.readouterr().out
    assert code == 0 and "memory 80GB read as 80 GiB" in out.split("Recommendation")[0]
    assert "of 80.0 GiB" in out


def test_assume_takes_a_bandwidth_with_units(capsys):
    from advisor.cli import main

    base = ["recommend", "--model", "llama-3-8b", "--gpu", "H100-SXM-80GB", "--gpus", "8", "--json"]
    assert main(base + ["--assume", "pcie_bandwidth=32 GB/s"]) == 0
    with_units = json.loads(capsys.readouterr().out)
    assert main(base + ["--assume", "pcie_bandwidth=32e9"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert with_units["estimates"]["assumptions"]["pcie_bandwidth"] == plain["estimates"]["assumptions"]["pcie_bandwidth"] == 32e9
