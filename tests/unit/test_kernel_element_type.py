"""The element type a kernel's name spells, for traces that recorded shapes without dtypes."""

from __future__ import annotations

from wlprof.cost.annotate import _typed_by_kernels, _untyped
from wlprof.cost.kernel_types import element_type

ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)")
COPY = ("void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_device(at::TensorIterator&, "
        "bool)::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
        "OffsetCalculator<1, unsigned int>, char*>(int, at::detail::Array<char*, 2>)")


def test_template_arguments_pointers_and_blas_prefixes_name_the_type():
    assert element_type([ADD]) == "float"
    assert element_type(["void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<"
                         "at::native::AddFunctor<long> >, at::detail::Array<char*, 2> >(int, char*)"]) == "long"
    # cuBLAS / cuDNN spell it by a letter; a reduction's `unsigned int` is its index type
    assert element_type(["volta_sgemm_128x64_nt", COPY]) == "float"
    assert element_type(["turing_h1688gemm_256x128_ldg8_nn"]) == "c10::Half"
    assert element_type(["void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                         "at::native::MeanOps<float, float>, unsigned int, float, 4> >(x)"]) == "float"
    # the indices a pooling backward reads (`long const*`), an embedding's `long`: two types, none chosen
    assert element_type(["void at::native::max_pool_backward_nchw<float, float>(int, float const*, "
                         "long const*, int, int)"]) is None
    assert element_type(["void at::native::embedding_backward_feature_kernel<float, float, long>(long*)"]) is None
    assert element_type(["cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", "Memset"]) is None
    assert element_type([ADD, "volta_hgemm_128x64_nt"]) is None


def test_the_type_every_kernel_names_beside_its_index_types():
    # cuDNN's helpers name an index type beside the data's: im2col4d's `long`, the sgemm's `int`; float is the
    # one type both name (a cuDNN autotune run launches them beside kernels that name float alone)
    im2col = ("void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_params, cudnnConvolutionStruct, "
              "cudnnTensor4dStruct, float const*, float*)")
    sgemm = ("void explicit_convolve_sgemm<float, int, 128, 6, 7, 3, 3, 5, 0, false>(int, int, int, float const*, "
             "int, float const*, int, float*, kernel_conv_params, unsigned long long, int)")
    assert element_type([im2col, sgemm]) == "float"
    assert element_type(["volta_scudnn_128x64_relu_medium_nn_v1", im2col, "cask_cudnn::computeOffsetsKernel("
                         "cask_cudnn::ComputeOffsetsParams)"]) == "float"
    assert element_type([im2col]) is None  # alone it names two
    assert element_type(["volta_hgemm_128x64_nt", im2col]) is None  # half and float share nothing


def test_untyped_args_are_typed_only_where_they_have_a_shape():
    args = {"Input Dims": [[32, 256, 56, 56], [32, 256, 56, 56], []], "Input type": []}
    assert _untyped(args)
    assert _typed_by_kernels(args, [ADD])["Input type"] == ["float", "float", ""]
    assert _typed_by_kernels(args, ["Memset (Device)"]) is args  # no type named: left as it is
    assert not _untyped({"Input Dims": [[4]], "Input type": ["c10::Half"]})
    assert not _untyped({"Input Dims": [[], []], "Input type": []})  # nothing shaped to type
