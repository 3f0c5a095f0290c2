"""bot.features.analysis: the JSON 5-layer form and torch_npu kernel_details.csv."""

from __future__ import annotations

import json

import pytest

from bot.features.analysis import AnalysisError, classify_op, load

HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim\n"
)


def test_json_layers_are_read_and_checked(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(
        json.dumps(
            {
                "schema": "tunebot.analysis/v1",
                "layers": {
                    "compute": {"matmul_pct": 40, "attention_pct": 25.5, "compiled": False},
                    "system": {"peak_memory_gb": 60, "memory_capacity_gb": 64},
                },
            }
        )
    )
    a = load(path)
    assert a.get("compute", "matmul_pct") == 40.0 and a.get("compute", "compiled") is False
    assert a.get("operator", "fa_pct") is None


@pytest.mark.parametrize(
    "layers, message",
    [
        ({"compute": {"matmul_pct": 140}}, "within 0..100"),
        ({"compute": {"matmul_pct": "40%"}}, "must be a number"),
        ({"compute": {"compiled": "no"}}, "true or false"),
        ({"compute": {"matmul": 4}}, "unknown field 'layers.compute.matmul'"),
        ({"kernels": {}}, "unknown layer 'layers.kernels'"),
        ({}, "non-empty object"),
    ],
)
def test_bad_json_names_the_field(tmp_path, layers, message):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"layers": layers}))
    with pytest.raises(AnalysisError, match=message):
        load(path)
    assert AnalysisError.exit_code == 2


def test_not_json_not_csv_and_missing_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("{ broken")
    with pytest.raises(AnalysisError, match="not valid JSON"):
        load(path)
    path.write_text("a,b\n1,2\n")
    with pytest.raises(AnalysisError, match="Name.*Duration"):
        load(path)
    with pytest.raises(AnalysisError, match="does not exist"):
        load(tmp_path / "nope.csv")


def test_ops_are_classified_by_name_and_type():
    assert classify_op("FlashAttentionScore_1", "FlashAttentionScore") == "FA"
    assert classify_op("aclnnFusedInferAttentionScore_v2", "FusedInferAttentionScore") == "FA"
    assert classify_op("MatMulV2_3", "MatMulV2") == "MatMul"
    assert classify_op("QuantBatchMatmulV3", "QuantBatchMatmulV3") == "MatMul"
    assert classify_op("hcom_allReduce__123_0_1", "hcom_allReduce_") == "Comm"
    assert classify_op("AllGather", "", "HCCL") == "Comm"
    assert classify_op("Add_12", "Add") == "Vector"
    assert classify_op("AscendQuantV2", "AscendQuantV2") == "Vector"  # 'send' is not in 'Ascend'


def test_kernel_details_shares(tmp_path):
    path = tmp_path / "kernel_details.csv"
    lines = [
        "1,0,1,2,MatMulV2_1,MatMulV2,dynamic,AI_CORE,0,500,10,20,0",
        "1,0,2,2,FlashAttentionScore_1,FlashAttentionScore,dynamic,MIX_AIC,0,300,10,24,48",
        "1,0,3,2,Add_1,Add,dynamic,AI_VECTOR_CORE,0,100,20,8,0",
        "1,0,4,3,hcom_allGather__1,hcom_allGather_,static,HCCL,0,100,60,0,0",
    ]
    path.write_text(HEADER + "\n".join(lines) + "\n")
    a = load(path)
    assert a.layers["compute"] == {
        "matmul_pct": 50.0,
        "attention_pct": 30.0,
        "vector_pct": 10.0,
        "comm_pct": 10.0,
    }
    assert a.get("operator", "fa_pct") == 30.0 and a.get("communication", "comm_pct") == 10.0
    assert a.get("operator", "host_bound_pct") == pytest.approx(100 * 100 / 1100, abs=0.01)
    assert a.notes
